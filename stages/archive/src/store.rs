//! Where finished files go: a directory (`file:///data/warc`) or an S3-compatible store
//! (`s3://bucket/prefix`). Either way a file is written in a local directory under a
//! temporary name (`….open`) and published whole: renamed into place in the directory
//! (the same file system, so atomically), or uploaded (multipart past 8 MiB, the parts
//! retried from the local copy) and completed. Until then no reader sees it; a file never
//! published is deleted, and its records are written again.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{
    ClientOptions, ObjectStore, ObjectStoreExt as _, PutPayload, RetryConfig, WriteMultipart,
};
use thiserror::Error;

/// Parts of a multipart upload; S3 takes 5 MiB to 5 GiB.
const PART_BYTES: usize = 8 << 20;
/// Parts uploading at once: bounds the memory an upload holds to this many parts.
const PARTS_IN_FLIGHT: usize = 4;
/// How long the store's client retries a request itself before the stage hears of it: the
/// stage's own retries then report the failure (metrics, /readyz) and go on.
const CLIENT_RETRY: RetryConfig = RetryConfig {
    backoff: object_store::BackoffConfig {
        init_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(2),
        base: 2.0,
    },
    max_retries: 3,
    retry_timeout: Duration::from_secs(15),
};
/// Longest one request may take (a part is 8 MiB) and one connection to open.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Suffix of a file being written, in the staging directory.
pub const STAGED_SUFFIX: &str = ".open";

#[derive(Debug, Error)]
pub enum DestinationError {
    #[error("--out {0:?}: expected file:///absolute/dir or s3://bucket[/prefix]")]
    Unsupported(String),
    #[error("--out {out:?}: {reason}")]
    Unusable { out: String, reason: String },
    #[error("--staging-dir {dir:?}: {reason}")]
    Staging { dir: PathBuf, reason: String },
}

/// An operation on the destination that failed; retried by the stage.
#[derive(Debug, Error)]
#[error("{operation} {name}: {reason}")]
pub struct StoreError {
    pub operation: &'static str,
    pub name: String,
    pub reason: String,
}

impl StoreError {
    fn new(operation: &'static str, name: &str, reason: impl std::fmt::Display) -> Self {
        Self { operation, name: name.to_owned(), reason: reason.to_string() }
    }
}

#[derive(Debug, Clone)]
pub enum Destination {
    Directory { root: PathBuf },
    ObjectStore { store: Arc<dyn ObjectStore>, prefix: String, display: String, staging: PathBuf },
}

impl Destination {
    /// The destination `out` names, its staging directory created. Credentials, region
    /// and endpoint of an S3 store come from the AWS environment variables
    /// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL`, …);
    /// `s3_endpoint` overrides the endpoint (MinIO, Ceph, …).
    pub fn open(
        out: &str,
        s3_endpoint: Option<&str>,
        staging: Option<&Path>,
    ) -> Result<Self, DestinationError> {
        let unusable = |reason: String| DestinationError::Unusable { out: out.to_owned(), reason };
        if let Some(path) = out.strip_prefix("file://") {
            let root = PathBuf::from(path);
            if !root.is_absolute() {
                return Err(DestinationError::Unsupported(out.to_owned()));
            }
            std::fs::create_dir_all(&root).map_err(|e| unusable(e.to_string()))?;
            check_writable(&root).map_err(|e| unusable(format!("not writable: {e}")))?;
            return Ok(Self::Directory { root });
        }
        let Some(location) = out.strip_prefix("s3://") else {
            return Err(DestinationError::Unsupported(out.to_owned()));
        };
        let (bucket, prefix) = location.split_once('/').unwrap_or((location, ""));
        if bucket.is_empty() {
            return Err(unusable("no bucket".to_owned()));
        }
        let options =
            ClientOptions::new().with_timeout(REQUEST_TIMEOUT).with_connect_timeout(CONNECT_TIMEOUT);
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_retry(CLIENT_RETRY)
            .with_client_options(options);
        if let Some(endpoint) = s3_endpoint {
            builder = builder.with_endpoint(endpoint).with_allow_http(endpoint.starts_with("http://"));
        } else if std::env::var("AWS_ENDPOINT_URL").is_ok_and(|endpoint| endpoint.starts_with("http://")) {
            builder = builder.with_allow_http(true);
        }
        let store = builder.build().map_err(|e| unusable(e.to_string()))?;
        let staging = staging.map_or_else(|| std::env::temp_dir().join("recrawl-archive"), Path::to_path_buf);
        let staging_error = |reason: String| DestinationError::Staging { dir: staging.clone(), reason };
        std::fs::create_dir_all(&staging).map_err(|e| staging_error(e.to_string()))?;
        check_writable(&staging).map_err(|e| staging_error(format!("not writable: {e}")))?;
        Ok(Self::ObjectStore {
            store: Arc::new(store),
            prefix: prefix.trim_matches('/').to_owned(),
            display: out.trim_end_matches('/').to_owned(),
            staging,
        })
    }

    /// The local directory files are written in before they are published.
    pub fn staging_dir(&self) -> &Path {
        match self {
            Self::Directory { root } => root,
            Self::ObjectStore { staging, .. } => staging,
        }
    }

    /// Where a published file `name` is, for people.
    pub fn location(&self, name: &str) -> String {
        match self {
            Self::Directory { root } => root.join(name).display().to_string(),
            Self::ObjectStore { display, .. } => format!("{display}/{name}"),
        }
    }

    /// Publishes the complete file `staged` as `name`. On an error nothing is published
    /// (a multipart upload is aborted) and `staged` stays, to be published again.
    pub async fn publish(&self, staged: &Path, name: &str) -> Result<(), StoreError> {
        match self {
            Self::Directory { root } => {
                let published = root.join(name);
                std::fs::rename(staged, &published).map_err(|e| StoreError::new("publishing", name, e))?;
                // The rename itself must outlive a power loss before the offsets are committed.
                std::fs::File::open(root)
                    .and_then(|dir| dir.sync_all())
                    .map_err(|e| StoreError::new("syncing the directory of", name, e))
            }
            Self::ObjectStore { store, prefix, .. } => {
                let location = object_path(prefix, name);
                upload(store.as_ref(), staged, &location)
                    .await
                    .map_err(|e| StoreError::new("uploading", name, e))?;
                std::fs::remove_file(staged)
                    .map_err(|e| StoreError::new("removing the staged copy of", name, e))
            }
        }
    }

    /// Whether a file `name` was published.
    pub async fn exists(&self, name: &str) -> Result<bool, StoreError> {
        match self {
            Self::Directory { root } => match std::fs::metadata(root.join(name)) {
                Ok(_) => Ok(true),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(error) => Err(StoreError::new("looking up", name, error)),
            },
            Self::ObjectStore { store, prefix, .. } => match store.head(&object_path(prefix, name)).await {
                Ok(_) => Ok(true),
                Err(object_store::Error::NotFound { .. }) => Ok(false),
                Err(error) => Err(StoreError::new("looking up", name, error)),
            },
        }
    }

    /// Removes the published file `name`, if there is one.
    pub async fn remove(&self, name: &str) -> Result<(), StoreError> {
        match self {
            Self::Directory { root } => match std::fs::remove_file(root.join(name)) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                    Err(StoreError::new("removing", name, error))
                }
                _ => Ok(()),
            },
            Self::ObjectStore { store, prefix, .. } => match store.delete(&object_path(prefix, name)).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(error) => Err(StoreError::new("removing", name, error)),
            },
        }
    }
}

fn object_path(prefix: &str, name: &str) -> ObjectPath {
    if prefix.is_empty() {
        ObjectPath::from(name)
    } else {
        ObjectPath::from(format!("{prefix}/{name}"))
    }
}

/// Uploads `staged` to `location`: in one request up to [`PART_BYTES`], else in parts.
async fn upload(store: &dyn ObjectStore, staged: &Path, location: &ObjectPath) -> Result<(), String> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(staged).map_err(|e| e.to_string())?;
    let size = file.metadata().map_err(|e| e.to_string())?.len();
    if size <= PART_BYTES as u64 {
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        file.read_to_end(&mut bytes).map_err(|e| e.to_string())?;
        store.put(location, PutPayload::from(bytes)).await.map_err(|e| e.to_string())?;
        return Ok(());
    }
    let upload = store.put_multipart(location).await.map_err(|e| e.to_string())?;
    let mut parts = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
    let mut buffer = vec![0u8; 1 << 20];
    let written = loop {
        let read = match file.read(&mut buffer) {
            Ok(0) => break Ok(()),
            Ok(read) => read,
            Err(error) => break Err(error.to_string()),
        };
        if let Err(error) = parts.wait_for_capacity(PARTS_IN_FLIGHT).await {
            break Err(error.to_string());
        }
        parts.write(&buffer[..read]);
    };
    match written {
        Ok(()) => parts.finish().await.map(drop).map_err(|e| e.to_string()),
        Err(error) => {
            if let Err(abort) = parts.abort().await {
                tracing::warn!(%abort, "aborting a failed upload failed; the store's lifecycle rule removes it");
            }
            Err(error)
        }
    }
}

fn check_writable(dir: &Path) -> std::io::Result<()> {
    let probe = dir.join(format!(".recrawl-archive-probe-{}", std::process::id()));
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(probe)
}

/// Removes what a crash left in `dir` of partition `partition`'s files under `prefix`:
/// files being written that were never published. Returns how many.
pub fn remove_staged_leftovers(dir: &Path, prefix: &str, partition: i32) -> std::io::Result<usize> {
    let endings =
        [format!("-p{partition}.warc.gz{STAGED_SUFFIX}"), format!("-p{partition}.cdxj{STAGED_SUFFIX}")];
    let mut removed = 0usize;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with(&format!("{prefix}-"))
            && endings.iter().any(|ending| name.ends_with(ending.as_str()))
        {
            std::fs::remove_file(entry.path())?;
            removed = removed.saturating_add(1);
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_destinations_are_refused_naming_the_flag() {
        for out in ["/data/warc", "file://relative/dir", "http://x/", "s3://"] {
            let error = Destination::open(out, None, None).unwrap_err().to_string();
            assert!(error.starts_with("--out"), "{out}: {error}");
        }
    }

    #[tokio::test]
    async fn a_directory_publishes_by_renaming_and_leftovers_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let out = format!("file://{}", dir.path().display());
        let destination = Destination::open(&out, None, None).unwrap();
        assert_eq!(destination.staging_dir(), dir.path());
        let staged = dir.path().join(format!("r-1-00001-h-p3.warc.gz{STAGED_SUFFIX}"));
        std::fs::write(&staged, b"x").unwrap();
        assert!(!destination.exists("r-1-00001-h-p3.warc.gz").await.unwrap());
        destination.publish(&staged, "r-1-00001-h-p3.warc.gz").await.unwrap();
        assert!(destination.exists("r-1-00001-h-p3.warc.gz").await.unwrap());
        assert!(!staged.exists());
        for name in [
            "r-2-00002-h-p3.warc.gz.open",
            "r-2-00002-h-p3.cdxj.open",
            "r-2-00002-h-p13.warc.gz.open",
            "q-2-1-h-p3.warc.gz.open",
        ] {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        assert_eq!(remove_staged_leftovers(dir.path(), "r", 3).unwrap(), 2);
        assert!(dir.path().join("r-2-00002-h-p13.warc.gz.open").exists(), "another partition's");
        assert!(dir.path().join("q-2-1-h-p3.warc.gz.open").exists(), "another prefix's");
        destination.remove("r-1-00001-h-p3.warc.gz").await.unwrap();
        destination.remove("r-1-00001-h-p3.warc.gz").await.unwrap();
        assert!(!destination.exists("r-1-00001-h-p3.warc.gz").await.unwrap());
    }
}
