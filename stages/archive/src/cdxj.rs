//! CDXJ index lines as pywb reads them and `cdxj-indexer` writes them:
//! `SURT TIMESTAMP14 {"url": …, "mime": …, "status": …, "digest": …, "length": …,
//! "offset": …, "filename": …}`, one per response and revisit record, the JSON as Python's
//! `json.dumps` writes it (`", "` and `": "` separators, non-ASCII as `\u` escapes), and
//! the file's lines sorted as bytes, as pywb's binary search needs.

use crate::surt::surt;
use crate::warc::timestamp14;

/// What an index line says of one record.
#[derive(Debug, Clone)]
pub struct IndexEntry<'a> {
    pub target_uri: &'a str,
    pub date_ms: i64,
    /// The media type, without parameters: `warc/revisit` for a revisit.
    pub mime: Option<&'a str>,
    pub status: Option<u16>,
    /// `sha1:…`, as the record's WARC-Payload-Digest.
    pub digest: &'a str,
    /// The record's gzip member: its length and offset in the file.
    pub length: u64,
    pub offset: u64,
    pub filename: &'a str,
}

impl IndexEntry<'_> {
    pub fn line(&self) -> String {
        let mut fields: Vec<(&str, String)> = vec![("url", self.target_uri.to_owned())];
        if let Some(mime) = self.mime {
            fields.push(("mime", mime.to_owned()));
        }
        if let Some(status) = self.status {
            fields.push(("status", status.to_string()));
        }
        fields.push(("digest", self.digest.to_owned()));
        fields.push(("length", self.length.to_string()));
        fields.push(("offset", self.offset.to_string()));
        fields.push(("filename", self.filename.to_owned()));
        let mut line = surt(self.target_uri);
        line.push(' ');
        line.push_str(&timestamp14(self.date_ms));
        line.push_str(" {");
        for (index, (name, value)) in fields.iter().enumerate() {
            if index > 0 {
                line.push_str(", ");
            }
            push_json_string(&mut line, name);
            line.push_str(": ");
            push_json_string(&mut line, value);
        }
        line.push('}');
        line
    }
}

/// The media type of a `Content-Type` value as `cdxj-indexer` keeps it: up to the first
/// `;` or white space (empty if that is where it starts).
pub fn mime_of(content_type: &str) -> &str {
    content_type.split([';', ' ', '\t', '\n', '\r', '\x0b', '\x0c']).next().unwrap_or_default().trim()
}

/// A header value as Python's HTTP parsing in warcio reads it: UTF-8, else Latin-1.
pub fn header_text(value: &[u8]) -> String {
    match std::str::from_utf8(value) {
        Ok(text) => text.to_owned(),
        Err(_) => value.iter().map(|&byte| char::from(byte)).collect(),
    }
}

/// `text` as a JSON string the way `json.dumps` (ensure_ascii) writes it.
fn push_json_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_what_cdxj_indexer_writes() {
        let entry = IndexEntry {
            target_uri: "http://www.example.com/a?b=1",
            date_ms: 1_764_590_405_123,
            mime: Some(mime_of("text/html; charset=utf-8")),
            status: Some(200),
            digest: "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ",
            length: 456,
            offset: 789,
            filename: "recrawl-1.warc.gz",
        };
        assert_eq!(
            entry.line(),
            "com,example)/a?b=1 20251201120005 {\"url\": \"http://www.example.com/a?b=1\", \
             \"mime\": \"text/html\", \"status\": \"200\", \"digest\": \
             \"sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ\", \"length\": \"456\", \"offset\": \"789\", \
             \"filename\": \"recrawl-1.warc.gz\"}"
        );
    }

    #[test]
    fn strings_are_escaped_as_python_s_json_dumps() {
        let mut out = String::new();
        push_json_string(&mut out, "a\"b\\c\u{1}é😀/");
        assert_eq!(out, r#""a\"b\\c\u0001\u00e9\ud83d\ude00/""#);
        assert_eq!(mime_of(" ;x"), "");
        assert_eq!(header_text(b"caf\xe9"), "café");
    }
}
