//! The one error type of weir-store.

/// What can go wrong talking to the store. Whatever the variant, a failed write changed nothing:
/// every write is one transaction.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The URL names no database weir can use. Fix the flag; retrying does not help.
    #[error("`{url}` is not a store URL: use sqlite:///path/to/weir.db or postgres://user@host:port/db")]
    Url { url: String },
    /// The database could not be reached or opened. Retrying may help once it is back.
    #[error("cannot open the store: {source}")]
    Connect { source: sqlx::Error },
    /// A statement failed (database gone, disk full, lock timeout). Retrying may help.
    #[error("store unavailable: {source}")]
    Unavailable { source: sqlx::Error },
    /// A stored value could not be read back as expected: a bug or a foreign schema.
    #[error("cannot read column `{column}`: {source}")]
    Decode { column: &'static str, source: sqlx::Error },
    /// The database's schema is newer than this weir knows. Upgrade weir.
    #[error("the store's schema is version {found}, newer than this weir's {known}")]
    SchemaTooNew { found: i64, known: i64 },
    /// The worker's lease on `cluster` has passed to another owner (its fencing number moved
    /// on): nothing was written. Not retryable; the worker must stop acting for the cluster.
    #[error("lease on cluster `{cluster}` lost (fence {fence} is no longer current)")]
    LeaseLost { cluster: String, fence: i64 },
}

impl StoreError {
    pub(crate) fn db(source: sqlx::Error) -> StoreError {
        StoreError::Unavailable { source }
    }

    pub(crate) fn connect(source: sqlx::Error) -> StoreError {
        StoreError::Connect { source }
    }

    pub(crate) fn decode(column: &'static str, source: sqlx::Error) -> StoreError {
        StoreError::Decode { column, source }
    }

    /// Whether the store itself is unreachable or failing (the API answers 503).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable { .. } | StoreError::Connect { .. })
    }
}
