//! The schema on both engines: SQLite's and PostgreSQL's tables, columns, keys and indexes are
//! the same, and migrating a database that is up to date applies nothing. The PostgreSQL tests
//! run against the cluster SEED_TEST_DATABASE_URL names (scripts/test starts one), each in a
//! database of its own.

use std::collections::BTreeSet;

use seed_store::{Config, LATEST_VERSION, Postgres, ScratchDatabase};

/// A runtime for the driver's calls.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// What a SQLite database's schema holds, one line per table, column, key, foreign key and
/// index, in the words [`postgres_schema`] uses.
fn sqlite_schema(connection: &rusqlite::Connection) -> BTreeSet<String> {
    let strings = |sql: &str| -> Vec<Vec<String>> {
        let mut statement = connection.prepare(sql).expect(sql);
        let width = statement.column_count();
        statement
            .query_map([], |row| {
                (0..width)
                    .map(|i| {
                        row.get::<_, rusqlite::types::Value>(i).map(|v| match v {
                            rusqlite::types::Value::Text(text) => text,
                            rusqlite::types::Value::Integer(n) => n.to_string(),
                            rusqlite::types::Value::Null => String::new(),
                            other => format!("{other:?}"),
                        })
                    })
                    .collect()
            })
            .and_then(Iterator::collect)
            .expect(sql)
    };
    let mut lines = BTreeSet::new();
    let tables =
        strings("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'");
    for table in tables.iter().map(|row| &row[0]) {
        lines.insert(format!("table {table}"));
        let mut key = Vec::new();
        for column in strings(&format!(
            "SELECT name, type, \"notnull\", pk FROM pragma_table_info('{table}') ORDER BY pk"
        )) {
            let [name, kind, not_null, pk] = &column[..] else {
                unreachable!()
            };
            // A key's columns are NOT NULL in PostgreSQL; SQLite's tables with a row id leave
            // that to the store's code for a key that is not the row id.
            let not_null = if not_null == "1" || pk != "0" {
                " not null"
            } else {
                ""
            };
            lines.insert(format!(
                "column {table}.{name} {}{not_null}",
                kind.to_lowercase()
            ));
            if pk != "0" {
                key.push(name.clone());
            }
        }
        lines.insert(format!("primary key {table} ({})", key.join(", ")));
        for index in strings(&format!(
            "SELECT name, \"unique\", origin, partial FROM pragma_index_list('{table}')"
        )) {
            let [name, unique, origin, partial] = &index[..] else {
                unreachable!()
            };
            let columns: Vec<String> = strings(&format!(
                "SELECT name FROM pragma_index_info('{name}') ORDER BY seqno"
            ))
            .into_iter()
            .map(|row| row[0].clone())
            .collect();
            let columns = columns.join(", ");
            match origin.as_str() {
                "pk" => {}
                "u" => {
                    lines.insert(format!("unique {table} ({columns})"));
                }
                _ => {
                    let unique = if unique == "1" { " unique" } else { "" };
                    let partial = if partial == "1" { " partial" } else { "" };
                    lines.insert(format!("index {table}.{name} ({columns}){unique}{partial}"));
                }
            }
        }
        let mut foreign_keys: std::collections::BTreeMap<
            String,
            (String, Vec<String>, Vec<String>, String),
        > = std::collections::BTreeMap::new();
        for key in strings(&format!(
            "SELECT id, \"table\", \"from\", \"to\", on_delete FROM pragma_foreign_key_list('{table}')
             ORDER BY id, seq"
        )) {
            let [id, references, from, to, on_delete] = &key[..] else {
                unreachable!()
            };
            let entry = foreign_keys.entry(id.clone()).or_insert_with(|| {
                (
                    references.clone(),
                    Vec::new(),
                    Vec::new(),
                    on_delete.to_lowercase(),
                )
            });
            entry.1.push(from.clone());
            entry.2.push(to.clone());
        }
        for (references, from, to, on_delete) in foreign_keys.into_values() {
            lines.insert(format!(
                "foreign key {table} ({}) references {references} ({}) on delete {on_delete}",
                from.join(", "),
                to.join(", ")
            ));
        }
    }
    lines
}

/// The same lines as [`sqlite_schema`], read from PostgreSQL's catalog (the public schema, but
/// the migrations' record of versions).
async fn postgres_schema(client: &tokio_postgres::Client) -> BTreeSet<String> {
    const TABLES: &str = "
        SELECT 'table ' || table_name FROM information_schema.tables
        WHERE table_schema = 'public' AND table_type = 'BASE TABLE'
            AND table_name <> 'seed_schema_versions'";
    const COLUMNS: &str = "
        SELECT 'column ' || table_name || '.' || column_name || ' '
            || CASE data_type WHEN 'bigint' THEN 'integer' WHEN 'bytea' THEN 'blob'
                   ELSE data_type END
            || CASE is_nullable WHEN 'NO' THEN ' not null' ELSE '' END
        FROM information_schema.columns
        WHERE table_schema = 'public' AND table_name <> 'seed_schema_versions'
            -- SQLite's row number, which it keeps without a column (migration 15)
            AND column_name <> 'rowid'";
    // The columns of each key, unique constraint and foreign key, in their order.
    const CONSTRAINTS: &str = "
        SELECT CASE c.contype WHEN 'p' THEN 'primary key ' WHEN 'u' THEN 'unique '
                   ELSE 'foreign key ' END
            || t.relname || ' ('
            || (SELECT string_agg(a.attname, ', ' ORDER BY k.ord)
                FROM unnest(c.conkey) WITH ORDINALITY AS k (attnum, ord)
                JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum)
            || ')'
            || CASE WHEN c.contype = 'f' THEN
                   ' references ' || r.relname || ' ('
                   || (SELECT string_agg(a.attname, ', ' ORDER BY k.ord)
                       FROM unnest(c.confkey) WITH ORDINALITY AS k (attnum, ord)
                       JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum)
                   || ') on delete '
                   || CASE c.confdeltype WHEN 'c' THEN 'cascade' WHEN 'n' THEN 'set null'
                          WHEN 'r' THEN 'restrict' WHEN 'd' THEN 'set default'
                          ELSE 'no action' END
               ELSE '' END
        FROM pg_constraint c
        JOIN pg_class t ON t.oid = c.conrelid
        LEFT JOIN pg_class r ON r.oid = c.confrelid
        WHERE t.relnamespace = 'public'::regnamespace AND c.contype IN ('p', 'u', 'f')
            AND t.relname <> 'seed_schema_versions'";
    // The indexes made by CREATE INDEX: those of no key or unique constraint. One that ends in
    // the `rowid` column is SQLite's of the same columns, whose every index ends in its rowid
    // without naming it.
    const INDEXES: &str = "
        SELECT 'index ' || t.relname || '.' || ic.relname || ' ('
            || (SELECT string_agg(a.attname, ', ' ORDER BY k.ord)
                FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k (attnum, ord)
                JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
                WHERE NOT (a.attname = 'rowid' AND k.ord = i.indnatts))
            || ')'
            || CASE WHEN i.indisunique THEN ' unique' ELSE '' END
            || CASE WHEN i.indpred IS NOT NULL THEN ' partial' ELSE '' END
        FROM pg_index i
        JOIN pg_class ic ON ic.oid = i.indexrelid
        JOIN pg_class t ON t.oid = i.indrelid
        WHERE t.relnamespace = 'public'::regnamespace
            AND NOT EXISTS (SELECT 1 FROM pg_constraint c
                            WHERE c.conindid = i.indexrelid AND c.contype IN ('p', 'u'))";
    let mut lines = BTreeSet::new();
    for sql in [TABLES, COLUMNS, CONSTRAINTS, INDEXES] {
        for row in client.query(sql, &[]).await.expect(sql) {
            lines.insert(row.get::<_, String>(0));
        }
    }
    lines
}

/// What one set has that the other lacks, for a failure's message.
fn difference(sqlite: &BTreeSet<String>, postgres: &BTreeSet<String>) -> String {
    let only = |a: &BTreeSet<String>, b: &BTreeSet<String>| {
        a.difference(b).cloned().collect::<Vec<_>>().join("\n  ")
    };
    format!(
        "only in SQLite:\n  {}\nonly in PostgreSQL:\n  {}",
        only(sqlite, postgres),
        only(postgres, sqlite)
    )
}

#[test]
fn both_engines_have_the_same_tables_columns_keys_and_indexes() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = Config::new(dir.path().join("seed.db"));
    seed_store::migrate_sqlite(&config).expect("a new SQLite database");
    let sqlite = sqlite_schema(&rusqlite::Connection::open(&config.path).expect("the database"));

    let database = ScratchDatabase::on_test_cluster();
    let postgres = runtime().block_on(async {
        let postgres = Postgres::connect(database.url())
            .await
            .expect("the test database");
        postgres.migrate().await.expect("the migrations");
        let (client, connection) = tokio_postgres::connect(database.url(), tokio_postgres::NoTls)
            .await
            .expect("a connection");
        let connection = tokio::spawn(connection);
        let schema = postgres_schema(&client).await;
        drop(client);
        let _ = connection.await;
        schema
    });
    assert!(
        sqlite
            .iter()
            .filter(|line| line.starts_with("index "))
            .count()
            >= 15
            && sqlite.iter().any(|line| line.starts_with("foreign key ")),
        "the SQLite schema was not read: {sqlite:#?}"
    );
    assert!(sqlite == postgres, "{}", difference(&sqlite, &postgres));
}

#[test]
fn migrating_an_up_to_date_database_applies_nothing_on_either_engine() {
    let every: Vec<u32> = (1..=LATEST_VERSION).collect();

    let dir = tempfile::tempdir().expect("a temp dir");
    let config = Config::new(dir.path().join("seed.db"));
    let first = seed_store::migrate_sqlite(&config).expect("a new SQLite database");
    assert_eq!(first.collect::<Vec<_>>(), every);
    let second = seed_store::migrate_sqlite(&config).expect("the database again");
    assert!(second.is_empty(), "{second:?}");

    let database = ScratchDatabase::on_test_cluster();
    runtime().block_on(async {
        let postgres = Postgres::connect(database.url())
            .await
            .expect("the test database");
        assert_eq!(
            postgres.applied_versions().await.expect("none yet"),
            Vec::<u32>::new()
        );
        assert_eq!(postgres.migrate().await.expect("the migrations"), every);
        assert_eq!(postgres.migrate().await.expect("again"), Vec::<u32>::new());
        assert_eq!(postgres.applied_versions().await.expect("every one"), every);
    });
}

/// Two processes that start on one new database at once: each version is applied by one.
#[test]
fn migrations_run_at_once_apply_each_version_once() {
    let database = ScratchDatabase::on_test_cluster();
    runtime().block_on(async {
        let (a, b) = (
            Postgres::connect(database.url()).await.expect("a pool"),
            Postgres::connect(database.url())
                .await
                .expect("another pool"),
        );
        let (from_a, from_b) = tokio::join!(a.migrate(), b.migrate());
        let mut applied = from_a.expect("the first migrations");
        applied.extend(from_b.expect("the second migrations"));
        applied.sort_unstable();
        assert_eq!(applied, (1..=LATEST_VERSION).collect::<Vec<_>>());
    });
}

#[test]
fn a_database_that_cannot_be_reached_or_a_bad_url_is_an_error() {
    runtime().block_on(async {
        // A port nothing listens on: one just let go.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let unreachable = Postgres::connect(&format!("postgres://seed@127.0.0.1:{port}/seed"))
            .await
            .expect_err("nothing listens there");
        assert!(unreachable.to_string().contains("connect"), "{unreachable}");
        let bad = Postgres::connect("postgres://seed@127.0.0.1:notaport/seed")
            .await
            .expect_err("not a URL");
        assert!(bad.to_string().contains("invalid"), "{bad}");
    });
}
