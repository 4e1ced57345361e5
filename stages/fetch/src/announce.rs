//! A bounded, non-expanding reader of the documents in which sites announce their pages:
//! sitemaps and sitemap indexes (sitemaps.org protocol), RSS 2.0 and Atom feeds.
//!
//! Everything a hostile server controls is bounded: the decompressed size, the entry count, the
//! nesting followed, and the text kept per field. Entity declarations are refused outright, and
//! references to entities other than the five predefined ones are never expanded (quick-xml does
//! not process DTDs, so it neither expands declared entities nor fetches external ones; it hands
//! every `&name;` to us as a separate event, and we resolve only the predefined names and
//! character references ourselves).

mod dates;

pub use dates::{rfc822_ms, w3c_datetime_ms};

use std::borrow::Cow;
use std::collections::HashSet;
use std::io::{self, BufReader, Read};

use flate2::read::MultiGzDecoder;
use quick_xml::encoding::Decoder;
use quick_xml::escape::resolve_xml_entity;
use quick_xml::events::{BytesRef, BytesStart, Event};
use quick_xml::Reader;
use recrawl_schemas::ClaimedChangeFrequency;
use url::Url;

/// Caps on what one document may make the reader do or keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnouncementLimits {
    /// Most entries kept per document (the protocol's 50,000).
    pub max_entries: usize,
    /// Most bytes of XML read, after gunzip (the protocol's 50 MB = 52_428_800).
    pub max_xml_bytes: u64,
    /// Deepest element nesting followed; deeper content is skipped (not an error).
    pub max_depth: usize,
    /// Longest URL text kept (8 * 1024).
    pub max_url_bytes: usize,
    /// Most URL text kept over a document's entries: a feed's short relative links
    /// resolved against a long document URL would otherwise keep 50,000 URLs of 8 KiB.
    pub max_url_text_bytes: usize,
}

impl Default for AnnouncementLimits {
    fn default() -> Self {
        AnnouncementLimits {
            max_entries: 50_000,
            max_xml_bytes: 52_428_800,
            max_depth: 16,
            max_url_bytes: 8 * 1024,
            // 50,000 URLs of 160 bytes; an entry past it counts as over the count.
            max_url_text_bytes: 8 << 20,
        }
    }
}

/// Which kind of document was read, from its root element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentKind {
    /// A sitemap `<urlset>` listing pages.
    UrlSet,
    /// A `<sitemapindex>` listing other sitemaps.
    SitemapIndex,
    /// An RSS 2.0 `<rss>` feed.
    Rss,
    /// An Atom `<feed>`.
    Atom,
}

/// One page (or, in a sitemap index, one child sitemap) announced by a document.
#[derive(Debug, Clone, PartialEq)]
pub struct Announced {
    /// Absolute http(s) URL, as parsed by `url::Url` (fragment removed).
    pub url: Url,
    /// The claimed time of the last change, Unix ms: a sitemap's `<lastmod>`, an RSS item's
    /// `<pubDate>` (or dc:date), an Atom entry's `<updated>` (else `<published>`).
    pub modified_unix_ms: Option<i64>,
    /// The sitemap's `<changefreq>`, if given and valid.
    pub change_freq: Option<ClaimedChangeFrequency>,
    /// `<priority>` in [0, 1]; out-of-range or unparsable values are dropped (None), counted as bad_values.
    pub priority: Option<f32>,
}

/// Counts of what was left out of a document, by reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Entries whose URL is not http(s), does not parse, or is over max_url_bytes.
    pub bad_urls: u64,
    /// Entries outside the document's scope (see below).
    pub out_of_scope: u64,
    /// Entries past max_entries.
    pub over_count: u64,
    /// Unparsable or out-of-range lastmod/date/priority/changefreq values (the entry is kept without them).
    pub bad_values: u64,
    /// Duplicate URLs within the document (the first is kept).
    pub duplicates: u64,
}

/// What a document announced.
#[derive(Debug, Clone, PartialEq)]
pub struct Announcements {
    /// The kind of document, from its root element.
    pub kind: DocumentKind,
    /// For UrlSet/Rss/Atom: the pages. For SitemapIndex: the child sitemaps (modified_unix_ms from `<lastmod>`).
    pub entries: Vec<Announced>,
    /// What was left out, and why.
    pub skipped: Skipped,
    /// Whether reading stopped early: max_xml_bytes reached, or the XML became malformed after some entries (what came before is kept).
    pub cut_short: bool,
}

/// Why a body could not be read as announcements at all.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum AnnouncementError {
    /// The root element is none of urlset, sitemapindex, rss, feed (name it in the message, truncated to 64 chars).
    #[error("root element <{0}> is not urlset, sitemapindex, rss or feed")]
    NotAnnouncements(String),
    /// Malformed before any root element was found, or a gzip stream that is corrupt before any XML came out.
    #[error("malformed document: {0}")]
    Malformed(String),
    /// A DOCTYPE declaring entities (<!ENTITY): refused outright, as no sitemap or feed needs one.
    #[error("document declares XML entities, which no sitemap or feed needs; refused")]
    EntityDeclaration,
}

/// Longest root element name quoted in an error.
const MAX_NAME_CHARS: usize = 64;
/// Longest parser message quoted in an error.
const MAX_MESSAGE_CHARS: usize = 200;
/// Text kept for a date, changefreq or priority; longer values are bad anyway.
const MAX_VALUE_BYTES: usize = 256;
/// Attributes read of a tag; no element of these documents needs more than a few.
const MAX_ATTRIBUTES: usize = 64;
/// How far `looks_like_announcements` looks.
const SNIFF_BYTES: usize = 4096;
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const UTF8_BOM: [u8; 3] = [0xef, 0xbb, 0xbf];

/// Reads a sitemap, sitemap index, RSS 2.0 or Atom document fetched from `document_url`.
/// `body` may be gzip (detected by the magic bytes 1f 8b, whatever the URL says); it is
/// decompressed in a streaming way and never past `limits.max_xml_bytes`.
///
/// Entries past `limits.max_entries` are counted in `over_count` but not stored, and reading goes
/// on to the end (or to `max_xml_bytes`), so the counts describe the whole document; the work is
/// bounded by `max_xml_bytes` either way.
///
/// An entry still open when the input ends or turns malformed is dropped without being counted.
pub fn read_announcements(
    document_url: &Url,
    body: &[u8],
    limits: &AnnouncementLimits,
) -> Result<Announcements, AnnouncementError> {
    let source = if body.starts_with(&GZIP_MAGIC) {
        Inflate::Gzip(Box::new(MultiGzDecoder::new(body)))
    } else {
        Inflate::Plain(body)
    };
    // Decompressed bytes stream through a small buffer into the parser; they are never collected.
    let mut reader = Reader::from_reader(BufReader::new(Capped::new(source, limits.max_xml_bytes)));
    // Mismatched end tags must be errors: depth tracking relies on proper nesting.
    reader.config_mut().check_end_names = true;
    let decoder = reader.decoder();
    let mut walk = Walk::new(document_url, limits, decoder);
    // quick-xml keeps a whole text event in `buf`, so one huge text node (say a 100 MB <loc>) is
    // held at once; the input cap bounds that by max_xml_bytes, which is accepted. What we copy
    // out of it per field is capped separately. Its stack of open element names likewise grows
    // with nesting only as far as the capped input allows, and nothing here recurses.
    let mut buf = Vec::new();
    let mut broken = false;
    loop {
        buf.clear();
        match reader.read_event_into(&mut buf) {
            Ok(event) => {
                if walk.on_event(event)? == Flow::Stop {
                    break;
                }
            }
            Err(err) => {
                let capped = reader.get_ref().get_ref();
                if walk.kind.is_none() {
                    let message = if capped.inflate_failed && capped.produced == 0 {
                        "gzip stream is corrupt".to_owned()
                    } else {
                        err.to_string()
                    };
                    return Err(AnnouncementError::Malformed(
                        message.chars().take(MAX_MESSAGE_CHARS).collect(),
                    ));
                }
                broken = true;
                break;
            }
        }
    }
    let Some(kind) = walk.kind else {
        return Err(AnnouncementError::Malformed("no root element".to_owned()));
    };
    let hit_limit = reader.get_ref().get_ref().hit_limit;
    // An unclosed root means the input ended early (truncated, or cut at max_xml_bytes).
    let cut_short = broken || hit_limit || !walk.root_closed;
    Ok(Announcements { kind, entries: walk.entries, skipped: walk.skipped, cut_short })
}

/// Whether `body` looks like one of these documents (for deciding whether to try):
/// gzip magic, or, after an optional UTF-8 BOM, whitespace, `<?xml …?>`, comments and a
/// DOCTYPE, a root element named urlset, sitemapindex, rss or feed. Looks at most at the
/// first 4 KiB. Cheap; no allocation of the body.
pub fn looks_like_announcements(body: &[u8]) -> bool {
    if body.starts_with(&GZIP_MAGIC) {
        return true;
    }
    let mut rest = body.get(..SNIFF_BYTES).unwrap_or(body);
    rest = rest.strip_prefix(&UTF8_BOM).unwrap_or(rest);
    loop {
        rest = trim_ascii_start(rest);
        if let Some(after) = rest.strip_prefix(b"<?") {
            match skip_past(after, b"?>") {
                Some(next) => rest = next,
                None => return false,
            }
        } else if let Some(after) = rest.strip_prefix(b"<!--") {
            match skip_past(after, b"-->") {
                Some(next) => rest = next,
                None => return false,
            }
        } else if rest.get(..9).is_some_and(|head| head.eq_ignore_ascii_case(b"<!DOCTYPE")) {
            match skip_doctype(rest) {
                Some(next) => rest = next,
                None => return false,
            }
        } else if let Some(after) = rest.strip_prefix(b"<") {
            let end = after
                .iter()
                .position(|b| b.is_ascii_whitespace() || matches!(b, b'>' | b'/'))
                .unwrap_or(after.len());
            let name = after.get(..end).unwrap_or_default();
            let local = name.rsplit(|&b| b == b':').next().unwrap_or(name);
            return root_kind(local).is_some();
        } else {
            return false;
        }
    }
}

fn trim_ascii_start(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(bytes.len());
    bytes.get(start..).unwrap_or_default()
}

/// The bytes after the first occurrence of `marker`.
fn skip_past<'a>(bytes: &'a [u8], marker: &[u8]) -> Option<&'a [u8]> {
    let at = bytes.windows(marker.len()).position(|window| window == marker)?;
    bytes.get(at.checked_add(marker.len())?..)
}

/// Skips a DOCTYPE, including an internal subset in brackets (whose declarations contain '>').
fn skip_doctype(bytes: &[u8]) -> Option<&[u8]> {
    let mut in_subset = false;
    let mut quote: Option<u8> = None;
    for (at, &byte) in bytes.iter().enumerate() {
        match (quote, byte) {
            (Some(q), b) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some(byte),
            (None, b'[') => in_subset = true,
            (None, b']') => in_subset = false,
            (None, b'>') if !in_subset => return bytes.get(at.checked_add(1)?..),
            _ => {}
        }
    }
    None
}

fn root_kind(local_name: &[u8]) -> Option<DocumentKind> {
    match local_name {
        b"urlset" => Some(DocumentKind::UrlSet),
        b"sitemapindex" => Some(DocumentKind::SitemapIndex),
        b"rss" => Some(DocumentKind::Rss),
        b"feed" => Some(DocumentKind::Atom),
        _ => None,
    }
}

/// The body, inflated if it is gzip (boxed: the decoder's state is large, the slice small).
enum Inflate<'a> {
    Plain(&'a [u8]),
    Gzip(Box<MultiGzDecoder<&'a [u8]>>),
}

impl Read for Inflate<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Inflate::Plain(bytes) => bytes.read(buf),
            Inflate::Gzip(decoder) => decoder.read(buf),
        }
    }
}

/// Ends the XML stream at the byte cap, and records whether there was more and whether
/// inflating failed, so the caller can tell a cut from a corrupt gzip.
struct Capped<'a> {
    inner: Inflate<'a>,
    remaining: u64,
    produced: u64,
    hit_limit: bool,
    probed: bool,
    inflate_failed: bool,
}

impl<'a> Capped<'a> {
    fn new(inner: Inflate<'a>, limit: u64) -> Self {
        Capped {
            inner,
            remaining: limit,
            produced: 0,
            hit_limit: false,
            probed: false,
            inflate_failed: false,
        }
    }
}

impl Read for Capped<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.remaining == 0 {
            // One byte of probing tells "exactly at the cap" from "cut at the cap".
            if !self.probed {
                self.probed = true;
                let mut probe = [0u8; 1];
                self.hit_limit = matches!(self.inner.read(&mut probe), Ok(n) if n > 0);
            }
            return Ok(0);
        }
        let want = usize::try_from(self.remaining).unwrap_or(usize::MAX).min(buf.len());
        let Some(window) = buf.get_mut(..want) else {
            return Ok(0);
        };
        match self.inner.read(window) {
            Ok(count) => {
                let count64 = u64::try_from(count).unwrap_or(u64::MAX);
                self.produced = self.produced.saturating_add(count64);
                self.remaining = self.remaining.saturating_sub(count64);
                Ok(count)
            }
            Err(err) => {
                if err.kind() != io::ErrorKind::Interrupted {
                    self.inflate_failed = true;
                }
                Err(err)
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    Stop,
}

/// The text of one field of an entry, capped as it is gathered.
#[derive(Debug, Default)]
struct FieldText {
    text: String,
    /// Unusable: an unknown entity, bad encoding, or more text than the cap.
    bad: bool,
    cap: usize,
}

impl FieldText {
    fn new(cap: usize) -> Self {
        FieldText { text: String::new(), bad: false, cap }
    }

    fn push(&mut self, piece: &str) {
        if self.bad {
            return;
        }
        // Leading whitespace would otherwise eat into the cap.
        let piece = if self.text.is_empty() { piece.trim_start() } else { piece };
        let room = self.cap.saturating_sub(self.text.len());
        if piece.len() <= room {
            self.text.push_str(piece);
            return;
        }
        let mut cut = room;
        while !piece.is_char_boundary(cut) {
            cut = cut.saturating_sub(1);
        }
        let (kept, dropped) = piece.split_at_checked(cut).unwrap_or(("", piece));
        self.text.push_str(kept);
        // Trailing whitespace past the cap is harmless; anything else makes the value too long.
        if !dropped.trim().is_empty() {
            self.bad = true;
        }
    }

    /// Whether the field said nothing at all (then it counts as absent, not bad).
    fn is_blank(&self) -> bool {
        !self.bad && self.text.trim().is_empty()
    }
}

/// Which field of the current entry receives text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Url,
    Guid,
    Date,
    AltDate,
    ChangeFreq,
    Priority,
}

/// An entry being read.
#[derive(Debug, Default)]
struct Draft {
    url: Option<FieldText>,
    guid: Option<FieldText>,
    /// lastmod, pubDate or updated.
    date: Option<FieldText>,
    /// dc:date or published.
    alt_date: Option<FieldText>,
    change_freq: Option<FieldText>,
    priority: Option<FieldText>,
}

impl Draft {
    fn slot_mut(&mut self, slot: Slot) -> &mut Option<FieldText> {
        match slot {
            Slot::Url => &mut self.url,
            Slot::Guid => &mut self.guid,
            Slot::Date => &mut self.date,
            Slot::AltDate => &mut self.alt_date,
            Slot::ChangeFreq => &mut self.change_freq,
            Slot::Priority => &mut self.priority,
        }
    }
}

/// The reading state; a flat state machine over element depth, so nesting costs no stack.
struct Walk<'a> {
    document_url: &'a Url,
    /// The document's path up to and including its last '/': the scope of a sitemap.
    document_dir: String,
    limits: &'a AnnouncementLimits,
    decoder: Decoder,
    kind: Option<DocumentKind>,
    depth: usize,
    root_closed: bool,
    in_channel: bool,
    draft: Option<Draft>,
    target: Option<Slot>,
    entries: Vec<Announced>,
    seen: HashSet<String>,
    /// URL text kept so far, against `limits.max_url_text_bytes`.
    url_text_bytes: usize,
    skipped: Skipped,
}

impl<'a> Walk<'a> {
    fn new(document_url: &'a Url, limits: &'a AnnouncementLimits, decoder: Decoder) -> Self {
        let path = document_url.path();
        let dir_end = path.rfind('/').and_then(|at| at.checked_add(1)).unwrap_or(0);
        Walk {
            document_url,
            document_dir: path.get(..dir_end).unwrap_or_default().to_owned(),
            limits,
            decoder,
            kind: None,
            depth: 0,
            root_closed: false,
            in_channel: false,
            draft: None,
            target: None,
            entries: Vec::new(),
            seen: HashSet::new(),
            url_text_bytes: 0,
            skipped: Skipped::default(),
        }
    }

    /// Depth of entry elements (url, sitemap, item, entry).
    fn entry_depth(&self) -> usize {
        match self.kind {
            Some(DocumentKind::Rss) => 3,
            _ => 2,
        }
    }

    fn field_depth(&self) -> usize {
        self.entry_depth().saturating_add(1)
    }

    fn on_event(&mut self, event: Event<'_>) -> Result<Flow, AnnouncementError> {
        match event {
            Event::Start(start) => {
                self.depth = self.depth.saturating_add(1);
                self.open(&start)?;
            }
            Event::Empty(start) => {
                self.depth = self.depth.saturating_add(1);
                self.open(&start)?;
                return Ok(self.close());
            }
            Event::End(_) => return Ok(self.close()),
            Event::Text(text) => {
                if self.kind.is_none() {
                    if !text.iter().all(u8::is_ascii_whitespace) {
                        return Err(AnnouncementError::Malformed("text before the root element".to_owned()));
                    }
                } else if let Some(field) = self.target_field() {
                    match text.decode() {
                        Ok(piece) => field.push(&piece),
                        Err(_) => field.bad = true,
                    }
                }
            }
            Event::CData(cdata) => {
                if self.kind.is_none() {
                    return Err(AnnouncementError::Malformed("CDATA before the root element".to_owned()));
                }
                if let Some(field) = self.target_field() {
                    match cdata.decode() {
                        Ok(piece) => field.push(&piece),
                        Err(_) => field.bad = true,
                    }
                }
            }
            Event::GeneralRef(reference) => {
                if self.kind.is_none() {
                    return Err(AnnouncementError::Malformed("reference before the root element".to_owned()));
                }
                if let Some(field) = self.target_field() {
                    match resolve_reference(&reference) {
                        Some(piece) => field.push(&piece),
                        None => field.bad = true,
                    }
                }
            }
            Event::DocType(doctype) => {
                // A sitemap or feed has no use for entities; refusing any declaration shuts out
                // entity expansion and external entities without having to reason about them.
                if contains_ignore_ascii_case(&doctype, b"<!ENTITY") {
                    return Err(AnnouncementError::EntityDeclaration);
                }
            }
            Event::Eof => return Ok(Flow::Stop),
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) => {}
        }
        Ok(Flow::Continue)
    }

    /// The field receiving text, if the parser is directly inside it (text in elements nested
    /// within a field is not part of its value).
    fn target_field(&mut self) -> Option<&mut FieldText> {
        let slot = self.target?;
        if self.depth != self.field_depth() {
            return None;
        }
        self.draft.as_mut()?.slot_mut(slot).as_mut()
    }

    fn open(&mut self, start: &BytesStart<'_>) -> Result<(), AnnouncementError> {
        let depth = self.depth;
        let local = start.local_name();
        let name = local.as_ref();
        if depth == 1 {
            let kind = root_kind(name).ok_or_else(|| {
                let qname = start.name();
                let shown = String::from_utf8_lossy(qname.as_ref());
                AnnouncementError::NotAnnouncements(shown.chars().take(MAX_NAME_CHARS).collect())
            })?;
            self.kind = Some(kind);
            return Ok(());
        }
        let Some(kind) = self.kind else {
            return Ok(());
        };
        if depth > self.limits.max_depth {
            return Ok(());
        }
        if depth == self.entry_depth() {
            let is_entry = match kind {
                DocumentKind::UrlSet => name == b"url",
                DocumentKind::SitemapIndex => name == b"sitemap",
                DocumentKind::Atom => name == b"entry",
                DocumentKind::Rss => self.in_channel && name == b"item",
            };
            if is_entry {
                self.draft = Some(Draft::default());
            }
        } else if kind == DocumentKind::Rss && depth == 2 && name == b"channel" {
            self.in_channel = true;
        } else if depth == self.field_depth() && self.draft.is_some() {
            self.open_field(kind, name, start);
        }
        Ok(())
    }

    fn open_field(&mut self, kind: DocumentKind, name: &[u8], start: &BytesStart<'_>) {
        use DocumentKind::{Atom, Rss, SitemapIndex, UrlSet};
        let url_cap = self.limits.max_url_bytes.saturating_add(1);
        let slot = match (kind, name) {
            (UrlSet | SitemapIndex, b"loc") => Slot::Url,
            (UrlSet | SitemapIndex, b"lastmod") => Slot::Date,
            (UrlSet, b"changefreq") => Slot::ChangeFreq,
            (UrlSet, b"priority") => Slot::Priority,
            // An atom:link inside an RSS item has the same local name but its URL in @href.
            (Rss, b"link") if self.attribute(start, b"href").is_none() => Slot::Url,
            (Rss, b"guid") => {
                let permalink = self.attribute(start, b"isPermaLink");
                if permalink.is_some_and(|value| value.is_none_or(|v| v.trim().eq_ignore_ascii_case("false")))
                {
                    return;
                }
                Slot::Guid
            }
            (Rss, b"pubDate") => Slot::Date,
            (Rss, b"date") => Slot::AltDate,
            (Atom, b"updated") => Slot::Date,
            (Atom, b"published") => Slot::AltDate,
            (Atom, b"link") => {
                self.open_atom_link(start, url_cap);
                return;
            }
            _ => return,
        };
        let cap = if matches!(slot, Slot::Url | Slot::Guid) { url_cap } else { MAX_VALUE_BYTES };
        let Some(draft) = self.draft.as_mut() else {
            return;
        };
        let field = draft.slot_mut(slot);
        // The first non-empty occurrence of a field wins.
        if field.as_ref().is_none_or(FieldText::is_blank) {
            *field = Some(FieldText::new(cap));
            self.target = Some(slot);
        }
    }

    /// Takes the first link whose rel is absent or "alternate"; self, edit, enclosure and the
    /// like point at other things than the entry's page.
    fn open_atom_link(&mut self, start: &BytesStart<'_>, url_cap: usize) {
        let rel_ok = match self.attribute(start, b"rel") {
            None => true,
            Some(Some(rel)) => rel.trim().eq_ignore_ascii_case("alternate"),
            Some(None) => false,
        };
        if !rel_ok {
            return;
        }
        let href = self.attribute(start, b"href");
        let Some(draft) = self.draft.as_mut() else {
            return;
        };
        if draft.url.as_ref().is_some_and(|field| !field.is_blank()) {
            return;
        }
        let mut field = FieldText::new(url_cap);
        match href {
            Some(Some(value)) => field.push(&value),
            Some(None) => field.bad = true,
            None => return,
        }
        draft.url = Some(field);
    }

    /// An attribute by local name: `None` if absent, `Some(None)` if present but unusable
    /// (malformed, badly encoded, or using an unknown entity).
    fn attribute(&self, start: &BytesStart<'_>, local_name: &[u8]) -> Option<Option<String>> {
        // No duplicate check (quick-xml's compares each attribute with every earlier one:
        // quadratic in a hostile tag's thousands), and no more than a tag of these
        // documents carries: past that the tag is unusable.
        for (index, attribute) in start.attributes().with_checks(false).enumerate() {
            if index >= MAX_ATTRIBUTES {
                return Some(None);
            }
            let Ok(attribute) = attribute else {
                return Some(None);
            };
            if attribute.key.local_name().as_ref() == local_name {
                // Only the five XML entities, whatever features quick-xml was built with.
                let value = attribute.decode_and_unescape_value_with(self.decoder, resolve_xml_entity);
                return Some(value.ok().map(Cow::into_owned));
            }
        }
        None
    }

    fn close(&mut self) -> Flow {
        let depth = self.depth;
        if depth == self.field_depth() {
            self.target = None;
        }
        if depth == self.entry_depth() {
            if let Some(draft) = self.draft.take() {
                self.finish(draft);
            }
        }
        if depth == 2 && self.kind == Some(DocumentKind::Rss) {
            self.in_channel = false;
        }
        self.depth = depth.saturating_sub(1);
        if depth == 1 {
            // Nothing after the root can matter.
            self.root_closed = true;
            return Flow::Stop;
        }
        Flow::Continue
    }

    fn finish(&mut self, draft: Draft) {
        let Some(kind) = self.kind else {
            return;
        };
        let url_field = match (&draft.url, &draft.guid) {
            (Some(url), _) if !url.is_blank() => Some(url),
            (_, Some(guid)) if kind == DocumentKind::Rss => Some(guid),
            (url, _) => url.as_ref(),
        };
        let Some(url) = url_field.and_then(|field| self.resolve(kind, field)) else {
            self.skipped.bad_urls = self.skipped.bad_urls.saturating_add(1);
            return;
        };
        if !self.in_scope(kind, &url) {
            self.skipped.out_of_scope = self.skipped.out_of_scope.saturating_add(1);
            return;
        }
        let is_self = kind == DocumentKind::SitemapIndex && {
            let mut document = self.document_url.clone();
            document.set_fragment(None);
            document == url
        };
        if is_self || self.seen.contains(url.as_str()) {
            self.skipped.duplicates = self.skipped.duplicates.saturating_add(1);
            return;
        }
        let url_text_bytes = self.url_text_bytes.saturating_add(url.as_str().len());
        if self.entries.len() >= self.limits.max_entries || url_text_bytes > self.limits.max_url_text_bytes {
            // Not remembered, so the seen-set stays bounded by max_entries.
            self.skipped.over_count = self.skipped.over_count.saturating_add(1);
            return;
        }
        self.url_text_bytes = url_text_bytes;
        self.seen.insert(url.as_str().to_owned());
        let modified_unix_ms = self.pick_date(kind, [draft.date.as_ref(), draft.alt_date.as_ref()]);
        let change_freq = draft
            .change_freq
            .as_ref()
            .and_then(|field| self.parse_value(field, ClaimedChangeFrequency::parse));
        let priority = draft.priority.as_ref().and_then(|field| {
            self.parse_value(field, |text| text.parse::<f32>().ok().filter(|p| (0.0..=1.0).contains(p)))
        });
        self.entries.push(Announced { url, modified_unix_ms, change_freq, priority });
    }

    /// The first parsable date of the candidates; each unparsable one tried counts as bad.
    fn pick_date(&mut self, kind: DocumentKind, candidates: [Option<&FieldText>; 2]) -> Option<i64> {
        let parse = |text: &str| match kind {
            DocumentKind::Rss => rfc822_ms(text).or_else(|| w3c_datetime_ms(text)),
            _ => w3c_datetime_ms(text),
        };
        candidates.into_iter().flatten().find_map(|field| self.parse_value(field, parse))
    }

    /// Parses a field; blank means absent, and a failure is counted as a bad value.
    fn parse_value<T>(&mut self, field: &FieldText, parse: impl Fn(&str) -> Option<T>) -> Option<T> {
        if field.is_blank() {
            return None;
        }
        let parsed = if field.bad { None } else { parse(field.text.trim()) };
        if parsed.is_none() {
            self.skipped.bad_values = self.skipped.bad_values.saturating_add(1);
        }
        parsed
    }

    /// Sitemaps must give absolute URLs; feeds may give them relative to the document.
    fn resolve(&self, kind: DocumentKind, field: &FieldText) -> Option<Url> {
        if field.bad {
            return None;
        }
        let text = field.text.trim();
        if text.is_empty() || text.len() > self.limits.max_url_bytes {
            return None;
        }
        let mut url = match kind {
            DocumentKind::UrlSet | DocumentKind::SitemapIndex => Url::parse(text).ok()?,
            DocumentKind::Rss | DocumentKind::Atom => self.document_url.join(text).ok()?,
        };
        if !matches!(url.scheme(), "http" | "https") {
            return None;
        }
        url.set_fragment(None);
        // Resolution can lengthen a URL, so check the result too.
        (url.as_str().len() <= self.limits.max_url_bytes).then_some(url)
    }

    /// Sitemaps speak for their own directory of their own origin (the protocol's rule);
    /// feeds for their own host.
    fn in_scope(&self, kind: DocumentKind, url: &Url) -> bool {
        let document = self.document_url;
        match kind {
            DocumentKind::UrlSet | DocumentKind::SitemapIndex => {
                url.scheme() == document.scheme()
                    && url.host_str() == document.host_str()
                    && url.port_or_known_default() == document.port_or_known_default()
                    && url.path().starts_with(&self.document_dir)
            }
            DocumentKind::Rss | DocumentKind::Atom => url.host_str() == document.host_str(),
        }
    }
}

/// Resolves a predefined entity or a character reference; anything else is never expanded.
fn resolve_reference(reference: &BytesRef<'_>) -> Option<String> {
    if reference.is_char_ref() {
        return reference.resolve_char_ref().ok().flatten().map(String::from);
    }
    let name = reference.decode().ok()?;
    resolve_xml_entity(&name).map(str::to_owned)
}

fn contains_ignore_ascii_case(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|window| window.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::GzEncoder;
    use flate2::{Compress, Compression, Crc, FlushCompress, Status};
    use std::io::Write;
    use std::time::{Duration, Instant};

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap_or_else(|err| panic!("test URL {text}: {err}"))
    }

    fn read(document: &str, body: &str) -> Result<Announcements, AnnouncementError> {
        read_announcements(&url(document), body.as_bytes(), &AnnouncementLimits::default())
    }

    fn read_ok(document: &str, body: &str) -> Announcements {
        read(document, body).unwrap_or_else(|err| panic!("unexpected error: {err}"))
    }

    /// A tag of 200,000 attributes costs one pass, not a comparison of every pair: the
    /// tag is unusable past 64, and the feed's other items still read.
    #[test]
    fn a_tag_of_endless_attributes_is_read_once_and_left() {
        let attributes: String = (0..200_000).map(|n| format!(" a{n}=\"\"")).collect();
        let body = format!(
            "<rss><channel><item><link{attributes}>/x.html</link></item>\
             <item><link>/y.html</link></item></channel></rss>"
        );
        let found = read_ok("https://a.example/feed.rss", &body);
        assert_eq!(urls(&found), ["https://a.example/y.html"]);
        assert_eq!(found.skipped.bad_urls, 1);
        let atom = format!("<feed><entry><link{attributes} href=\"/z.html\"/></entry></feed>");
        let found = read_ok("https://a.example/feed.atom", &atom);
        assert!(found.entries.is_empty());
        assert_eq!(found.skipped.bad_urls, 1);
    }

    /// Short relative links against a long feed URL: the URL text kept is bounded, the
    /// rest counted over.
    #[test]
    fn the_url_text_a_document_keeps_is_bounded() {
        let document = format!("https://a.example/{}/feed.rss", "d".repeat(4000));
        let items: String = (0..100).map(|n| format!("<item><link>?{n}</link></item>")).collect();
        let body = format!("<rss><channel>{items}</channel></rss>");
        let limits = AnnouncementLimits { max_url_text_bytes: 40_000, ..AnnouncementLimits::default() };
        let url = Url::parse(&document).unwrap();
        let found = read_announcements(&url, body.as_bytes(), &limits).unwrap();
        let kept: usize = found.entries.iter().map(|entry| entry.url.as_str().len()).sum();
        assert!(kept <= 40_000 && found.entries.len() == 9, "{} kept, {kept} bytes", found.entries.len());
        assert_eq!(found.skipped.over_count, 91);
    }

    fn urls(found: &Announcements) -> Vec<&str> {
        found.entries.iter().map(|entry| entry.url.as_str()).collect()
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(bytes).unwrap_or_else(|err| panic!("{err}"));
        encoder.finish().unwrap_or_else(|err| panic!("{err}"))
    }

    /// Gzips `head`, then `chunk` `repeat` times, then `tail`, without holding the whole.
    fn gzip_stream(head: &[u8], chunk: &[u8], repeat: usize, tail: &[u8]) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
        let mut write = |bytes: &[u8]| encoder.write_all(bytes).unwrap_or_else(|err| panic!("{err}"));
        write(head);
        for _ in 0..repeat {
            write(chunk);
        }
        write(tail);
        encoder.finish().unwrap_or_else(|err| panic!("{err}"))
    }

    const URLSET_OPEN: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">"#;

    #[test]
    fn urlset_with_values() {
        let body = format!(
            "{URLSET_OPEN}
  <url><loc>https://a.example/news/one</loc><lastmod>2024-02-29</lastmod>
       <changefreq> Daily </changefreq><priority>0.8</priority></url>
  <url><loc>  https://a.example/news/two#frag  </loc><lastmod>2005-01-01T01:00:00+02:00</lastmod>
       <changefreq>sometimes</changefreq><priority>1.5</priority></url>
  <url><loc><![CDATA[https://a.example/news/three?a=1&b=2]]></loc><lastmod>2024-13-01</lastmod></url>
  <url><loc>https://a.example/news/four?a=1&amp;b=&#50;</loc><lastmod>2005-01-01T00:00:01.25Z</lastmod>
       <priority>nope</priority></url>
</urlset>"
        );
        let found = read_ok("https://a.example/news/sitemap.xml", &body);
        assert_eq!(found.kind, DocumentKind::UrlSet);
        assert!(!found.cut_short);
        assert_eq!(
            urls(&found),
            [
                "https://a.example/news/one",
                "https://a.example/news/two",
                "https://a.example/news/three?a=1&b=2",
                "https://a.example/news/four?a=1&b=2"
            ]
        );
        let [one, two, three, four] = found.entries.as_slice() else { panic!("four entries expected") };
        assert_eq!(one.modified_unix_ms, Some(19_782 * 86_400_000));
        assert_eq!(one.change_freq, Some(ClaimedChangeFrequency::Daily));
        assert_eq!(one.priority, Some(0.8));
        assert_eq!(two.modified_unix_ms, Some(1_104_534_000_000));
        assert_eq!(two.change_freq, None);
        assert_eq!(two.priority, None);
        assert_eq!(three.modified_unix_ms, None);
        assert_eq!(four.modified_unix_ms, Some(1_104_537_601_250));
        assert_eq!(four.priority, None);
        // sometimes, 1.5, 2024-13-01, nope.
        assert_eq!(found.skipped, Skipped { bad_values: 4, ..Skipped::default() });
    }

    #[test]
    fn unknown_entity_spoils_only_its_field() {
        let body = format!(
            "{URLSET_OPEN}
  <url><loc>https://a.example/x&nbsp;y</loc></url>
  <url><loc>https://a.example/ok</loc><lastmod>2020&foo;-01-01</lastmod></url>
</urlset>"
        );
        let found = read_ok("https://a.example/sitemap.xml", &body);
        assert_eq!(urls(&found), ["https://a.example/ok"]);
        assert_eq!(found.entries.first().and_then(|entry| entry.modified_unix_ms), None);
        assert_eq!(found.skipped, Skipped { bad_urls: 1, bad_values: 1, ..Skipped::default() });
    }

    #[test]
    fn sitemap_index_and_self_reference() {
        let body = r#"<?xml version="1.0"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc>https://a.example/maps/one.xml.gz</loc><lastmod>2004-10-01T18:23:17+00:00</lastmod></sitemap>
  <sitemap><loc>https://a.example/maps/index.xml</loc></sitemap>
  <sitemap><loc>https://a.example/maps/two.xml</loc></sitemap>
  <sitemap><loc>https://a.example/maps/two.xml</loc></sitemap>
  <sitemap><loc>/maps/relative.xml</loc></sitemap>
</sitemapindex>"#;
        let found = read_ok("https://a.example/maps/index.xml", body);
        assert_eq!(found.kind, DocumentKind::SitemapIndex);
        assert_eq!(urls(&found), ["https://a.example/maps/one.xml.gz", "https://a.example/maps/two.xml"]);
        assert_eq!(found.entries.first().and_then(|entry| entry.modified_unix_ms), Some(1_096_654_997_000));
        assert_eq!(found.skipped, Skipped { duplicates: 2, bad_urls: 1, ..Skipped::default() });
    }

    #[test]
    fn rss_items() {
        let body = r#"<?xml version="1.0"?>
<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:atom="http://www.w3.org/2005/Atom">
 <channel>
  <title>News</title><link>https://a.example/</link>
  <atom:link href="https://a.example/feed.xml" rel="self"/>
  <item>
   <atom:link href="https://a.example/feed.xml" rel="self"/>
   <link>../posts/1</link><pubDate>Sat, 07 Sep 2002 09:42:31 GMT</pubDate>
  </item>
  <item><guid>https://a.example/posts/2</guid><dc:date>2002-09-07T09:42:31Z</dc:date></item>
  <item><guid isPermaLink="false">https://a.example/posts/3</guid></item>
  <item><link>http://a.example/posts/4</link><pubDate>Caturday</pubDate></item>
  <item><link>https://b.example/posts/5</link></item>
  <item><link>mailto:someone@a.example</link></item>
 </channel>
</rss>"#;
        let found = read_ok("https://a.example/feeds/main.xml", body);
        assert_eq!(found.kind, DocumentKind::Rss);
        assert_eq!(
            urls(&found),
            ["https://a.example/posts/1", "https://a.example/posts/2", "http://a.example/posts/4"]
        );
        let expected = Some(1_031_391_751_000);
        assert_eq!(found.entries.first().and_then(|entry| entry.modified_unix_ms), expected);
        assert_eq!(found.entries.get(1).and_then(|entry| entry.modified_unix_ms), expected);
        assert_eq!(
            found.skipped,
            Skipped { bad_urls: 2, out_of_scope: 1, bad_values: 1, ..Skipped::default() }
        );
    }

    #[test]
    fn atom_entries() {
        let body = r#"<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <link rel="self" href="https://a.example/atom.xml"/>
  <entry>
    <link rel="self" href="https://a.example/api/1"/>
    <link rel="edit" href="https://a.example/edit/1"/>
    <link rel="alternate" type="text/html" href="/posts/1#top"/>
    <updated>2003-12-13T18:30:02Z</updated><published>2003-12-13T08:29:29-04:00</published>
  </entry>
  <entry>
    <link rel="enclosure" href="https://a.example/audio.mp3"/>
    <link href="https://a.example/posts/2?x=1&amp;y=2"/>
    <published>2003-12-13T08:29:29-04:00</published>
  </entry>
  <entry><link rel="self" href="https://a.example/api/3"/><updated>2003-12-13T18:30:02Z</updated></entry>
</feed>"#;
        let found = read_ok("https://a.example/atom.xml", body);
        assert_eq!(found.kind, DocumentKind::Atom);
        assert_eq!(urls(&found), ["https://a.example/posts/1", "https://a.example/posts/2?x=1&y=2"]);
        assert_eq!(found.entries.first().and_then(|entry| entry.modified_unix_ms), Some(1_071_340_202_000));
        assert_eq!(found.entries.get(1).and_then(|entry| entry.modified_unix_ms), Some(1_071_318_569_000));
        assert_eq!(found.skipped, Skipped { bad_urls: 1, ..Skipped::default() });
    }

    #[test]
    fn gzip_sitemap_whatever_the_url() {
        let body = format!("{URLSET_OPEN}<url><loc>https://a.example/page</loc></url></urlset>");
        let zipped = gzip(body.as_bytes());
        assert!(looks_like_announcements(&zipped));
        let found = read_announcements(
            &url("https://a.example/sitemap.xml"),
            &zipped,
            &AnnouncementLimits::default(),
        );
        assert_eq!(found.map(|found| urls(&found).join(" ")), Ok("https://a.example/page".to_owned()));
    }

    #[test]
    fn corrupt_gzip_is_malformed() {
        let mut zipped = gzip(b"<urlset></urlset>");
        for byte in zipped.iter_mut().skip(10) {
            *byte ^= 0x5a;
        }
        let result =
            read_announcements(&url("https://a.example/s.xml"), &zipped, &AnnouncementLimits::default());
        assert!(matches!(result, Err(AnnouncementError::Malformed(_))), "{result:?}");
    }

    #[test]
    fn scope_rules() {
        let body = format!(
            "{URLSET_OPEN}
  <url><loc>https://a.example/news/x</loc></url>
  <url><loc>https://a.example/news/deeper/y</loc></url>
  <url><loc>https://A.EXAMPLE:443/news/z</loc></url>
  <url><loc>https://b.example/news/x</loc></url>
  <url><loc>http://a.example/news/x</loc></url>
  <url><loc>https://a.example/other</loc></url>
  <url><loc>https://a.example/newsy</loc></url>
  <url><loc>https://a.example:8443/news/x</loc></url>
  <url><loc>https://sub.a.example/news/x</loc></url>
</urlset>"
        );
        let found = read_ok("https://a.example/news/sitemap.xml", &body);
        assert_eq!(
            urls(&found),
            ["https://a.example/news/x", "https://a.example/news/deeper/y", "https://a.example/news/z"]
        );
        assert_eq!(found.skipped, Skipped { out_of_scope: 6, ..Skipped::default() });
        // Feeds: same host, any scheme or path, but not another host.
        let feed = r#"<feed xmlns="http://www.w3.org/2005/Atom">
  <entry><link href="http://a.example/anywhere"/></entry>
  <entry><link href="https://b.example/x"/></entry></feed>"#;
        let found = read_ok("https://a.example/news/feed.xml", feed);
        assert_eq!(urls(&found), ["http://a.example/anywhere"]);
        assert_eq!(found.skipped.out_of_scope, 1);
    }

    #[test]
    fn duplicates_keep_the_first() {
        let body = format!(
            "{URLSET_OPEN}
  <url><loc>https://a.example/p</loc><priority>0.1</priority></url>
  <url><loc>https://a.example/p#again</loc><priority>0.9</priority></url>
  <url><loc>https://a.example/q</loc></url>
  <url><loc>https://a.example/p</loc></url>
</urlset>"
        );
        let found = read_ok("https://a.example/sitemap.xml", &body);
        assert_eq!(urls(&found), ["https://a.example/p", "https://a.example/q"]);
        assert_eq!(found.entries.first().and_then(|entry| entry.priority), Some(0.1));
        assert_eq!(found.skipped, Skipped { duplicates: 2, ..Skipped::default() });
    }

    #[test]
    fn over_long_and_bad_urls() {
        let limits = AnnouncementLimits { max_url_bytes: 40, ..AnnouncementLimits::default() };
        let long = format!("https://a.example/{}", "x".repeat(40));
        let body = format!(
            "{URLSET_OPEN}<url><loc>{long}</loc></url><url><loc>ftp://a.example/f</loc></url>
<url><loc>not a url</loc></url><url><lastmod>2020</lastmod></url>
<url><loc>https://a.example/fits</loc></url></urlset>"
        );
        let found = read_announcements(&url("https://a.example/s.xml"), body.as_bytes(), &limits);
        let found = found.unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(urls(&found), ["https://a.example/fits"]);
        assert_eq!(found.skipped, Skipped { bad_urls: 4, ..Skipped::default() });
    }

    #[test]
    fn billion_laughs_is_refused_fast() {
        let mut body = String::from("<?xml version=\"1.0\"?>\n<!DOCTYPE lolz [\n <!ENTITY lol \"lol\">\n");
        for level in 1..10 {
            let previous = if level == 1 { "lol".to_owned() } else { format!("lol{}", level - 1) };
            body.push_str(&format!(" <!ENTITY lol{level} \"{}\">\n", format!("&{previous};").repeat(10)));
        }
        body.push_str("]>\n<urlset><url><loc>https://a.example/&lol9;</loc></url></urlset>");
        let started = Instant::now();
        assert_eq!(read("https://a.example/s.xml", &body), Err(AnnouncementError::EntityDeclaration));
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(!looks_like_announcements(b"<!DOCTYPE x [ <!ENTITY a \"]>\"> ]"));
    }

    #[test]
    fn external_entity_is_refused() {
        let body = r#"<?xml version="1.0"?>
<!DOCTYPE urlset [<!ENTITY e SYSTEM "file:///etc/passwd">]>
<urlset><url><loc>https://a.example/&e;</loc></url></urlset>"#;
        assert!(looks_like_announcements(body.as_bytes()));
        assert_eq!(read("https://a.example/s.xml", body), Err(AnnouncementError::EntityDeclaration));
        // Without a declaration the reference is not expanded, just makes the URL bad.
        let body = "<urlset><url><loc>https://a.example/&e;</loc></url></urlset>";
        let found = read_ok("https://a.example/s.xml", body);
        assert!(found.entries.is_empty());
        assert_eq!(found.skipped.bad_urls, 1);
    }

    /// Gzips `head`, `mib` MiB of zero bytes, then `tail`, without compressing all those zeros:
    /// one MiB is deflated once, after a window's worth of zeros so that its back-references only
    /// ever reach zeros, and its (byte-aligned, non-final) blocks are repeated.
    fn gzip_zero_bomb(head: &[u8], mib: usize, tail: &[u8]) -> Vec<u8> {
        let mut compress = Compress::new(Compression::default(), false);
        let mut deflate = |mut input: &[u8], flush: FlushCompress| {
            let mut out = Vec::with_capacity(input.len() / 64 + 4096);
            loop {
                out.reserve(4096);
                let before = compress.total_in();
                let status =
                    compress.compress_vec(input, &mut out, flush).unwrap_or_else(|err| panic!("{err}"));
                let used = usize::try_from(compress.total_in() - before).unwrap_or(usize::MAX);
                input = input.get(used..).unwrap_or_default();
                // A flush is complete once the compressor stops filling all the space it was given.
                if status == Status::StreamEnd || (input.is_empty() && out.len() < out.capacity()) {
                    return out;
                }
            }
        };
        let zeros = vec![0u8; 1 << 20];
        let mut body = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
        body.extend(deflate(head, FlushCompress::None));
        body.extend(deflate(&zeros, FlushCompress::Sync));
        let repeated = deflate(&zeros, FlushCompress::Sync);
        for _ in 1..mib {
            body.extend_from_slice(&repeated);
        }
        body.extend(deflate(tail, FlushCompress::Finish));
        let mut crc = Crc::new();
        crc.update(head);
        let mut zeros_crc = Crc::new();
        zeros_crc.update(&zeros);
        for _ in 0..mib {
            crc.combine(&zeros_crc);
        }
        let mut tail_crc = Crc::new();
        tail_crc.update(tail);
        crc.combine(&tail_crc);
        body.extend_from_slice(&crc.sum().to_le_bytes());
        body.extend_from_slice(&crc.amount().to_le_bytes());
        body
    }

    #[test]
    fn zero_bomb_helper_is_a_valid_gzip() {
        let bomb = gzip_zero_bomb(b"<a>", 3, b"</a>");
        let mut inflated = Vec::new();
        MultiGzDecoder::new(bomb.as_slice()).read_to_end(&mut inflated).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(inflated.len(), 3 + (3 << 20) + 4);
        assert!(inflated.starts_with(b"<a>\0") && inflated.ends_with(b"\0</a>"));
        assert_eq!(inflated.iter().filter(|&&byte| byte != 0).count(), 7);
    }

    #[test]
    fn gzip_bomb_of_zeros_stops_at_the_cap() {
        // 1 GiB of zeros inside the root element, as text.
        let bomb = gzip_zero_bomb(URLSET_OPEN.as_bytes(), 1024, b"</urlset>");
        assert!(bomb.len() < 2 << 20, "bomb is {} bytes", bomb.len());
        let started = Instant::now();
        let found =
            read_announcements(&url("https://a.example/s.xml"), &bomb, &AnnouncementLimits::default());
        let found = found.unwrap_or_else(|err| panic!("{err}"));
        assert!(found.cut_short);
        assert!(found.entries.is_empty());
        assert!(started.elapsed() < Duration::from_secs(20));
        // Zeros before any root: rejected on sight.
        let bomb = gzip_zero_bomb(b"", 1024, b"");
        let result =
            read_announcements(&url("https://a.example/s.xml"), &bomb, &AnnouncementLimits::default());
        assert!(matches!(result, Err(AnnouncementError::Malformed(_))), "{result:?}");
    }

    #[test]
    fn gzip_bomb_of_entries_stops_at_the_cap() {
        let limits =
            AnnouncementLimits { max_xml_bytes: 4 << 20, max_entries: 1000, ..AnnouncementLimits::default() };
        let chunk = "<url><loc>https://a.example/same</loc></url>".repeat(100);
        let bomb = gzip_stream(URLSET_OPEN.as_bytes(), chunk.as_bytes(), 5_000, b"</urlset>");
        let started = Instant::now();
        let found = read_announcements(&url("https://a.example/s.xml"), &bomb, &limits);
        let found = found.unwrap_or_else(|err| panic!("{err}"));
        assert!(found.cut_short);
        assert_eq!(urls(&found), ["https://a.example/same"]);
        // About 4 MiB / 44 bytes per entry were read, and no more.
        let read_entries = found.skipped.duplicates.saturating_add(1);
        assert!((90_000..=100_000).contains(&read_entries), "{read_entries}");
        assert!(started.elapsed() < Duration::from_secs(30));
    }

    #[test]
    fn exactly_at_the_cap_is_not_cut() {
        let body = format!("{URLSET_OPEN}<url><loc>https://a.example/p</loc></url></urlset>");
        let size = u64::try_from(body.len()).unwrap_or(u64::MAX);
        let exact = AnnouncementLimits { max_xml_bytes: size, ..AnnouncementLimits::default() };
        let found = read_announcements(&url("https://a.example/s.xml"), body.as_bytes(), &exact);
        assert_eq!(found.map(|found| (found.cut_short, found.entries.len())), Ok((false, 1)));
        let short = AnnouncementLimits { max_xml_bytes: size - 1, ..AnnouncementLimits::default() };
        let found = read_announcements(&url("https://a.example/s.xml"), body.as_bytes(), &short);
        assert_eq!(found.map(|found| found.cut_short), Ok(true));
    }

    #[test]
    fn many_entries_over_the_cap_are_counted() {
        let limits = AnnouncementLimits { max_entries: 100, ..AnnouncementLimits::default() };
        let mut body = String::from(URLSET_OPEN);
        for index in 0..10_000 {
            body.push_str(&format!("<url><loc>https://a.example/p{index}</loc></url>"));
        }
        body.push_str("</urlset>");
        let found = read_announcements(&url("https://a.example/s.xml"), body.as_bytes(), &limits);
        let found = found.unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(found.entries.len(), 100);
        assert_eq!(found.entries.last().map(|entry| entry.url.as_str()), Some("https://a.example/p99"));
        assert_eq!(found.skipped.over_count, 9_900);
        assert!(!found.cut_short);
    }

    #[test]
    fn deep_nesting_is_skipped_without_recursion() {
        let depth = 100_000;
        let mut body = String::from(URLSET_OPEN);
        body.push_str("<url><loc>https://a.example/first</loc></url>");
        body.push_str(&"<a>".repeat(depth));
        body.push_str("<url><loc>https://a.example/deep</loc></url>");
        body.push_str(&"</a>".repeat(depth));
        body.push_str("<url><loc>https://a.example/after</loc></url></urlset>");
        let found = read_ok("https://a.example/s.xml", &body);
        assert_eq!(urls(&found), ["https://a.example/first", "https://a.example/after"]);
        assert!(!found.cut_short);
        // A depth cap below the entries' depth skips them, without error.
        let shallow = AnnouncementLimits { max_depth: 1, ..AnnouncementLimits::default() };
        let found = read_announcements(&url("https://a.example/s.xml"), body.as_bytes(), &shallow);
        assert_eq!(found.map(|found| found.entries.len()), Ok(0));
    }

    #[test]
    fn huge_loc_is_capped_and_bad() {
        let limits = AnnouncementLimits { max_xml_bytes: 8 << 20, ..AnnouncementLimits::default() };
        let body = format!(
            "{URLSET_OPEN}<url><loc>https://a.example/{}</loc></url><url><loc>https://a.example/ok</loc></url></urlset>",
            "x".repeat(5 << 20)
        );
        let found = read_announcements(&url("https://a.example/s.xml"), body.as_bytes(), &limits);
        let found = found.unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(urls(&found), ["https://a.example/ok"]);
        assert_eq!(found.skipped.bad_urls, 1);
    }

    #[test]
    fn malformed_after_entries_keeps_them() {
        let body = format!(
            "{URLSET_OPEN}<url><loc>https://a.example/a</loc></url><url><loc>https://a.example/b</loc></oops></urlset>"
        );
        let found = read_ok("https://a.example/s.xml", &body);
        assert_eq!(urls(&found), ["https://a.example/a"]);
        assert!(found.cut_short);
        // Truncated input: also cut short.
        let found = read_ok(
            "https://a.example/s.xml",
            &format!("{URLSET_OPEN}<url><loc>https://a.example/a</loc></url><url>"),
        );
        assert_eq!(urls(&found), ["https://a.example/a"]);
        assert!(found.cut_short);
    }

    #[test]
    fn not_announcements() {
        let html = "<!DOCTYPE html>\n<html><head><title>x</title></head><body></body></html>";
        assert_eq!(
            read("https://a.example/", html),
            Err(AnnouncementError::NotAnnouncements("html".to_owned()))
        );
        let long = format!("<{} />", "n".repeat(100));
        assert_eq!(
            read("https://a.example/", &long),
            Err(AnnouncementError::NotAnnouncements("n".repeat(64)))
        );
        assert!(matches!(read("https://a.example/", "just some text"), Err(AnnouncementError::Malformed(_))));
        assert!(matches!(read("https://a.example/", ""), Err(AnnouncementError::Malformed(_))));
        assert!(matches!(
            read("https://a.example/", "<?xml version=\"1.0\"?>"),
            Err(AnnouncementError::Malformed(_))
        ));
        assert!(matches!(
            read("https://a.example/", "{\"json\": true}"),
            Err(AnnouncementError::Malformed(_))
        ));
        let binary = [0xffu8, 0xd8, 0xff, 0xe0, 0, 0x10];
        let result = read_announcements(&url("https://a.example/"), &binary, &AnnouncementLimits::default());
        assert!(matches!(result, Err(AnnouncementError::Malformed(_))));
    }

    #[test]
    fn bom_and_prefixed_root() {
        let body = "\u{feff}<?xml version=\"1.0\"?><!-- hi --><sm:urlset xmlns:sm=\"http://www.sitemaps.org/schemas/sitemap/0.9\"><sm:url><sm:loc>https://a.example/p</sm:loc></sm:url></sm:urlset>";
        assert!(looks_like_announcements(body.as_bytes()));
        assert_eq!(urls(&read_ok("https://a.example/s.xml", body)), ["https://a.example/p"]);
    }

    #[test]
    fn looks_like_cases() {
        for yes in [
            "<urlset>",
            "<sitemapindex xmlns=\"x\">",
            "  \n<rss version=\"2.0\">",
            "<feed/>",
            "\u{feff}<?xml version=\"1.0\"?>\n<!-- c > -->\n<!DOCTYPE rss [<!ELEMENT rss ANY>]>\n<rss>",
            "<!doctype feed><atom:feed>",
        ] {
            assert!(looks_like_announcements(yes.as_bytes()), "{yes:?}");
        }
        assert!(looks_like_announcements(&[0x1f, 0x8b, 0x08]));
        let late = format!("<!--{}--><urlset>", " ".repeat(5000));
        for no in [
            "",
            "<html>",
            "<!DOCTYPE html><html>",
            "hello <urlset>",
            "<urlsetx>",
            "<?xml",
            "<!-- <urlset>",
            &late,
        ] {
            assert!(!looks_like_announcements(no.as_bytes()), "{no:?}");
        }
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        const VALID: &str = r#"<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>https://a.example/a</loc><lastmod>2020-01-01</lastmod><changefreq>daily</changefreq><priority>0.5</priority></url><url><loc>https://a.example/b&amp;c</loc></url><url><loc><![CDATA[https://a.example/d]]></loc></url></urlset>"#;

        #[derive(Debug, Clone)]
        enum Mutation {
            Replace(usize, u8),
            Insert(usize, u8),
            Delete(usize),
            Truncate(usize),
        }

        fn mutation() -> impl Strategy<Value = Mutation> {
            prop_oneof![
                (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Replace(at, byte)),
                (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Insert(at, byte)),
                any::<usize>().prop_map(Mutation::Delete),
                any::<usize>().prop_map(Mutation::Truncate),
            ]
        }

        fn check(body: &[u8]) {
            let limits = AnnouncementLimits { max_entries: 2, ..AnnouncementLimits::default() };
            let _ = looks_like_announcements(body);
            if let Ok(found) = read_announcements(&url("https://a.example/s.xml"), body, &limits) {
                assert!(found.entries.len() <= limits.max_entries);
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(300))]

            #[test]
            fn arbitrary_bytes(body in proptest::collection::vec(any::<u8>(), 0..600)) {
                check(&body);
            }

            #[test]
            fn mutated_sitemap(mutations in proptest::collection::vec(mutation(), 1..8), zip in any::<bool>()) {
                let mut body = VALID.as_bytes().to_vec();
                for change in mutations {
                    let len = body.len().max(1);
                    match change {
                        Mutation::Replace(at, byte) => {
                            if let Some(slot) = body.get_mut(at % len) {
                                *slot = byte;
                            }
                        }
                        Mutation::Insert(at, byte) => body.insert(at % (body.len() + 1), byte),
                        Mutation::Delete(at) => {
                            if at % len < body.len() {
                                body.remove(at % len);
                            }
                        }
                        Mutation::Truncate(at) => body.truncate(at % len),
                    }
                }
                check(&body);
                if zip {
                    let mut zipped = gzip(&body);
                    check(&zipped);
                    let half = zipped.len() / 2;
                    zipped.truncate(half.max(2));
                    check(&zipped);
                }
            }
        }
    }
}
