//! The values that cross between the store and either engine: [`Value`], what binds to a
//! parameter ([`ToSql`]) and what reads from a column ([`FromSql`]), and SQLite's side of
//! both.

/// A value bound to a statement or read from a row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Integer(i64),
    Real(f64),
    Text(&'a str),
    Blob(&'a [u8]),
}

impl Value<'_> {
    fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Integer(_) => "integer",
            Value::Real(_) => "real",
            Value::Text(_) => "text",
            Value::Blob(_) => "blob",
        }
    }
}

/// What may be bound to a statement's parameter.
pub(crate) trait ToSql {
    fn to_sql(&self) -> Value<'_>;
}

/// The parameters of a statement, as [`params!`](crate::params) makes them.
pub(crate) type Params<'p> = &'p [&'p dyn ToSql];

/// The parameters of a statement: `params![a, b]`, or `params![]` for none.
#[macro_export]
#[doc(hidden)]
macro_rules! params {
    () => {
        &[] as &[&dyn $crate::sql::ToSql]
    };
    ($($param:expr),+ $(,)?) => {
        &[$(&$param as &dyn $crate::sql::ToSql),+] as &[&dyn $crate::sql::ToSql]
    };
}

impl ToSql for i64 {
    fn to_sql(&self) -> Value<'_> {
        Value::Integer(*self)
    }
}

macro_rules! integer_to_sql {
    ($($t:ty),*) => {$(
        impl ToSql for $t {
            fn to_sql(&self) -> Value<'_> {
                Value::Integer(i64::from(*self))
            }
        }
    )*};
}
integer_to_sql!(i32, u32, u16, u8, bool);

impl ToSql for usize {
    fn to_sql(&self) -> Value<'_> {
        // Counts and sizes in memory; none comes near i64::MAX.
        Value::Integer(i64::try_from(*self).unwrap_or(i64::MAX))
    }
}

impl ToSql for u64 {
    fn to_sql(&self) -> Value<'_> {
        Value::Integer(i64::try_from(*self).unwrap_or(i64::MAX))
    }
}

impl ToSql for f64 {
    fn to_sql(&self) -> Value<'_> {
        Value::Real(*self)
    }
}

impl ToSql for str {
    fn to_sql(&self) -> Value<'_> {
        Value::Text(self)
    }
}

impl ToSql for String {
    fn to_sql(&self) -> Value<'_> {
        Value::Text(self)
    }
}

impl ToSql for [u8] {
    fn to_sql(&self) -> Value<'_> {
        Value::Blob(self)
    }
}

impl ToSql for Vec<u8> {
    fn to_sql(&self) -> Value<'_> {
        Value::Blob(self)
    }
}

impl<T: ToSql + ?Sized> ToSql for &T {
    fn to_sql(&self) -> Value<'_> {
        (**self).to_sql()
    }
}

impl<T: ToSql + ?Sized> ToSql for Box<T> {
    fn to_sql(&self) -> Value<'_> {
        (**self).to_sql()
    }
}

impl<T: ToSql> ToSql for Option<T> {
    fn to_sql(&self) -> Value<'_> {
        match self {
            Some(value) => value.to_sql(),
            None => Value::Null,
        }
    }
}

impl ToSql for Value<'_> {
    fn to_sql(&self) -> Value<'_> {
        *self
    }
}

/// What may be read from a row's column.
pub(crate) trait FromSql: Sized {
    /// `Err` says what was found instead.
    fn from_sql(value: Value<'_>) -> std::result::Result<Self, String>;
}

fn mismatch<T>(wanted: &str, found: Value<'_>) -> std::result::Result<T, String> {
    Err(format!("expected {wanted}, found {}", found.kind()))
}

impl FromSql for i64 {
    fn from_sql(value: Value<'_>) -> std::result::Result<Self, String> {
        match value {
            Value::Integer(n) => Ok(n),
            other => mismatch("an integer", other),
        }
    }
}

macro_rules! integer_from_sql {
    ($($t:ty),*) => {$(
        impl FromSql for $t {
            fn from_sql(value: Value<'_>) -> std::result::Result<Self, String> {
                let n = i64::from_sql(value)?;
                <$t>::try_from(n).map_err(|_| format!("{n} is out of range for {}", stringify!($t)))
            }
        }
    )*};
}
integer_from_sql!(i32, u32, u16, u8, u64, usize);

impl FromSql for bool {
    fn from_sql(value: Value<'_>) -> std::result::Result<Self, String> {
        Ok(i64::from_sql(value)? != 0)
    }
}

impl FromSql for f64 {
    fn from_sql(value: Value<'_>) -> std::result::Result<Self, String> {
        match value {
            Value::Real(x) => Ok(x),
            #[expect(
                clippy::cast_precision_loss,
                reason = "as SQLite reads an integer as real"
            )]
            Value::Integer(n) => Ok(n as f64),
            other => mismatch("a number", other),
        }
    }
}

impl FromSql for String {
    fn from_sql(value: Value<'_>) -> std::result::Result<Self, String> {
        match value {
            Value::Text(text) => Ok(text.to_owned()),
            other => mismatch("text", other),
        }
    }
}

impl FromSql for Vec<u8> {
    fn from_sql(value: Value<'_>) -> std::result::Result<Self, String> {
        match value {
            Value::Blob(bytes) => Ok(bytes.to_vec()),
            Value::Text(text) => Ok(text.as_bytes().to_vec()),
            other => mismatch("a blob", other),
        }
    }
}

impl<T: FromSql> FromSql for Option<T> {
    fn from_sql(value: Value<'_>) -> std::result::Result<Self, String> {
        match value {
            Value::Null => Ok(None),
            other => T::from_sql(other).map(Some),
        }
    }
}

/// SQLite's binding of a [`Value`].
impl rusqlite::ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::ValueRef;
        Ok(rusqlite::types::ToSqlOutput::Borrowed(match *self {
            Value::Null => ValueRef::Null,
            Value::Integer(n) => ValueRef::Integer(n),
            Value::Real(x) => ValueRef::Real(x),
            Value::Text(text) => ValueRef::Text(text.as_bytes()),
            Value::Blob(bytes) => ValueRef::Blob(bytes),
        }))
    }
}

/// A value SQLite read, as the store's [`Value`].
pub(super) fn sqlite_value(value: rusqlite::types::ValueRef<'_>) -> Value<'_> {
    use rusqlite::types::ValueRef;
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(n) => Value::Integer(n),
        ValueRef::Real(x) => Value::Real(x),
        // SQLite's text is UTF-8 as the store writes it; text that is not is read as a blob
        // so that reading it as a string says the row is corrupt.
        ValueRef::Text(text) => std::str::from_utf8(text).map_or(Value::Blob(text), Value::Text),
        ValueRef::Blob(bytes) => Value::Blob(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_back_as_their_types_or_say_what_they_are() {
        assert_eq!(i64::from_sql(Value::Integer(7)), Ok(7));
        assert_eq!(Option::<i64>::from_sql(Value::Null), Ok(None));
        assert_eq!(bool::from_sql(Value::Integer(1)), Ok(true));
        assert_eq!(
            String::from_sql(Value::Integer(1)),
            Err("expected text, found integer".to_owned())
        );
        assert_eq!(
            u8::from_sql(Value::Integer(300)),
            Err("300 is out of range for u8".to_owned())
        );
    }
}
