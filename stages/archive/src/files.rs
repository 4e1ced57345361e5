//! A WARC file being written in the staging directory, its CDXJ index kept beside it in
//! memory until the file is sealed. Named as the field names them:
//! `PREFIX-TIMESTAMP-SERIAL-INSTANCE.warc.gz`, the timestamp the file's opening to the
//! millisecond, the serial counting the files this process opened, the instance the
//! host (or `--warc-instance`) and the input partition (`-p3`), one file being open per
//! partition: a partition moving to another instance takes nothing of another's with it.

use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use crate::store::STAGED_SUFFIX;
use crate::warc::{timestamp17, Gzip, WarcInfo};

/// An index this large seals its file, however small the file: the index is held in
/// memory until then (about 250 bytes a record: some 64,000 records).
pub const MAX_INDEX_BYTES: usize = 16 << 20;

/// The WARC file `PREFIX-TIMESTAMP-SERIAL-INSTANCE.warc.gz`.
pub fn warc_name(prefix: &str, opened_ms: i64, serial: u64, instance: &str, partition: i32) -> String {
    format!("{prefix}-{}-{serial:05}-{instance}-p{partition}.warc.gz", timestamp17(opened_ms))
}

/// The index beside the WARC file `warc_name`.
pub fn index_name(warc_name: &str) -> String {
    format!("{}.cdxj", warc_name.strip_suffix(".warc.gz").unwrap_or(warc_name))
}

/// A file being written.
#[derive(Debug)]
pub struct OpenFile {
    pub name: String,
    staged: PathBuf,
    file: std::fs::File,
    /// Bytes written, every one of them part of a whole record.
    len: u64,
    pub opened: tokio::time::Instant,
    pub warcinfo_id: String,
    pub first_offset: i64,
    /// The input offset after the last record this file covers.
    pub next_offset: i64,
    index: Vec<String>,
    index_bytes: usize,
}

/// A sealed file waiting to be published: complete in the staging directory.
#[derive(Debug)]
pub struct StagedFile {
    pub name: String,
    pub staged: PathBuf,
    pub index_name: String,
    pub staged_index: PathBuf,
    /// Published already: the index goes first, so a published WARC file always has one.
    pub index_published: bool,
    pub bytes: u64,
    pub first_offset: i64,
    pub next_offset: i64,
}

impl OpenFile {
    /// Creates `name` in `dir` under its temporary name, its warcinfo record first.
    pub fn create(
        dir: &Path,
        name: String,
        info: &WarcInfo,
        now_ms: i64,
        first_offset: i64,
        gzip: &mut Gzip,
    ) -> std::io::Result<Self> {
        let staged = dir.join(format!("{name}{STAGED_SUFFIX}"));
        let (warcinfo, warcinfo_id) = info.record(&name, now_ms);
        let mut member = Vec::new();
        warcinfo.write_gzip(gzip, &mut member).map_err(std::io::Error::other)?;
        let file =
            std::fs::OpenOptions::new().create(true).truncate(true).read(true).write(true).open(&staged)?;
        let mut open = Self {
            name,
            staged,
            file,
            len: 0,
            opened: tokio::time::Instant::now(),
            warcinfo_id,
            first_offset,
            next_offset: first_offset,
            index: Vec::new(),
            index_bytes: 0,
        };
        if let Err(error) = open.append(&member) {
            open.discard();
            return Err(error);
        }
        Ok(open)
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn index_bytes(&self) -> usize {
        self.index_bytes
    }

    /// Appends whole gzip members at the end. A failed write (a full disk) is cut off
    /// again, so the file only ever holds whole records and the same bytes can be tried
    /// again later.
    pub fn append(&mut self, members: &[u8]) -> std::io::Result<()> {
        let written = self.file.write_all_at(members, self.len);
        if let Err(error) = written {
            // Cut back to the last whole record; should that fail too, the write is
            // still only tried again at the same offset.
            let _ = self.file.set_len(self.len);
            return Err(error);
        }
        self.len = self.len.saturating_add(members.len() as u64);
        Ok(())
    }

    /// Adds a line of the file's index.
    pub fn index(&mut self, line: String) {
        self.index_bytes = self.index_bytes.saturating_add(line.len()).saturating_add(1);
        self.index.push(line);
    }

    /// Flushes the file to disk and writes its sorted index beside it. On an error the
    /// file stays open as it was, to be sealed again.
    pub fn seal(&mut self) -> std::io::Result<StagedFile> {
        self.file.sync_all()?;
        let index_name = index_name(&self.name);
        let staged_index = self.staged.with_file_name(format!("{index_name}{STAGED_SUFFIX}"));
        self.index.sort_unstable();
        let mut text = String::with_capacity(self.index_bytes);
        for line in &self.index {
            text.push_str(line);
            text.push('\n');
        }
        let written = std::fs::write(&staged_index, text.as_bytes())
            .and_then(|()| std::fs::File::open(&staged_index).and_then(|file| file.sync_all()));
        if let Err(error) = written {
            let _ = std::fs::remove_file(&staged_index);
            return Err(error);
        }
        Ok(StagedFile {
            name: self.name.clone(),
            staged: self.staged.clone(),
            index_name,
            staged_index,
            index_published: false,
            bytes: self.len,
            first_offset: self.first_offset,
            next_offset: self.next_offset,
        })
    }

    /// Deletes the file: its records are written again elsewhere.
    pub fn discard(&self) {
        if let Err(error) = std::fs::remove_file(&self.staged) {
            tracing::warn!(file = %self.staged.display(), %error, "an unpublished file could not be removed");
        }
    }
}

impl StagedFile {
    /// Deletes what is left of the file in the staging directory.
    pub fn discard(&self) {
        for path in [&self.staged, &self.staged_index] {
            match std::fs::remove_file(path) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                    tracing::warn!(file = %path.display(), %error, "an unpublished file could not be removed");
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> WarcInfo {
        WarcInfo { software: "recrawl".into(), operator: None, description: None, hostname: "h".into() }
    }

    #[test]
    fn names_are_prefix_timestamp_serial_instance() {
        let name = warc_name("recrawl", 1_764_590_405_123, 7, "archive-0", 3);
        assert_eq!(name, "recrawl-20251201120005123-00007-archive-0-p3.warc.gz");
        assert_eq!(index_name(&name), "recrawl-20251201120005123-00007-archive-0-p3.cdxj");
    }

    #[test]
    fn a_sealed_file_has_its_warcinfo_first_and_its_index_sorted() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = OpenFile::create(
            dir.path(),
            "r.warc.gz".into(),
            &info(),
            0,
            5,
            &mut Gzip::new(Default::default()),
        )
        .unwrap();
        let warcinfo_bytes = file.len();
        assert!(warcinfo_bytes > 0);
        file.append(b"more").unwrap();
        file.index("b 2 {}".into());
        file.index("a 1 {}".into());
        file.next_offset = 9;
        let sealed = file.seal().unwrap();
        assert_eq!((sealed.first_offset, sealed.next_offset, sealed.bytes), (5, 9, warcinfo_bytes + 4));
        assert_eq!(std::fs::read_to_string(&sealed.staged_index).unwrap(), "a 1 {}\nb 2 {}\n");
        assert!(sealed.staged.ends_with("r.warc.gz.open"));
        sealed.discard();
        assert!(!sealed.staged.exists() && !sealed.staged_index.exists());
    }
}
