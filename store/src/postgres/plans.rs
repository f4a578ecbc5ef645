//! The plans PostgreSQL makes for the store's statements where the one SQLite makes would not
//! tell: a statement that SQLite answers from an index may have PostgreSQL read a whole table.

use crate::postgres::scratch::with_scratch_postgres;
use crate::sql::postgres_text;

/// Runs `f` with a client of a fresh migrated database on the test cluster.
fn with_database<F, T>(f: F) -> T
where
    F: AsyncFnOnce(&tokio_postgres::Client) -> T,
{
    with_scratch_postgres(async |postgres| {
        postgres.migrate().await.expect("migrates");
        let client = postgres.pool.get().await.expect("a client");
        f(&client).await
    })
}

/// The generic plan (the one a connection keeps for a statement it runs again and again) of
/// `sql`, run with `arguments`, its lines joined.
async fn generic_plan(client: &tokio_postgres::Client, sql: &str, arguments: &str) -> String {
    client
        .batch_execute(&format!(
            "SET plan_cache_mode = force_generic_plan; PREPARE planned AS {}",
            postgres_text(sql)
        ))
        .await
        .expect("prepares");
    let lines = client
        .query(&format!("EXPLAIN EXECUTE planned({arguments})"), &[])
        .await
        .expect("explains");
    client
        .batch_execute("DEALLOCATE planned")
        .await
        .expect("deallocates");
    lines
        .iter()
        .map(|line| line.get::<_, String>(0))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A claim reads an account's queued runs in the order they were queued and stops at the
/// first whose session is free: it neither reads the runs that ended (thousands, in a
/// long-lived database) nor sorts the queued ones. With `IS NOT DISTINCT FROM` for the account,
/// or without the row's number in the index, PostgreSQL read and sorted them all (about 200 µs
/// a claim at 100 sessions, against 38 µs now).
#[test]
fn a_claim_reads_the_queued_runs_of_its_account_in_order() {
    let plans = with_database(async |client| {
        client
            .batch_execute(
                "INSERT INTO accounts (id, public_key, created_at) VALUES ('acct', '\\x00', 0);
                 INSERT INTO sessions (id, account_id, created_at, updated_at)
                     SELECT 's' || n, 'acct', 0, 0 FROM generate_series(1, 100) AS n;
                 INSERT INTO runs (id, session_id, queue, status, created_at, updated_at, account_id)
                     SELECT 'r' || n, 's' || (n % 100 + 1), 'interactive',
                            CASE WHEN n <= 8000 THEN 'succeeded'
                                 WHEN n % 2 = 0 THEN 'running' ELSE 'queued' END,
                            0, 0, 'acct'
                     FROM generate_series(1, 8100) AS n;
                 ANALYZE",
            )
            .await
            .expect("the runs");
        let in_order = generic_plan(
            client,
            crate::runs::NEXT_CLAIMABLE_OF_ACCOUNT,
            "'interactive', 'owner', 'acct'",
        )
        .await;
        let of_none = generic_plan(
            client,
            crate::runs::NEXT_CLAIMABLE_OF_NONE,
            "'interactive', 'owner', NULL",
        )
        .await;
        (in_order, of_none)
    });
    let (in_order, of_none) = plans;
    assert!(
        in_order.contains("Index Scan using runs_queued_by_account on runs queued")
            && in_order.contains("Index Cond: (account_id = $3)")
            && !in_order.contains("Sort"),
        "{in_order}"
    );
    // The runs that name no account (made before runs named one; none here) are looked up in
    // the same index.
    assert!(
        of_none.contains("Index Scan using runs_queued_by_account on runs queued")
            && of_none.contains("Index Cond: (account_id IS NULL)"),
        "{of_none}"
    );
}
