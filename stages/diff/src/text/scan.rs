//! [`visible_text`] as one pass over the page's bytes: the states of the WHATWG tokenizer
//! that decide what is text (data, tags and their attributes, comments, the doctype, raw
//! text, RCDATA, script data with its escapes, plaintext) and its character references,
//! without building tokens. It keeps the text html5ever's tokenizer, driven as a tree
//! builder would drive it, hands out (`tests/text_corpus.rs` compares the two on real
//! pages), and reads a page ~7× faster (the `text` bench).
//!
//! Named references use html5ever's own table (`markup5ever::data`), which also holds every
//! prefix of a name, so the longest match is found as html5ever finds it.

// Index arithmetic: every `+` is on a position within the page or one past a byte that
// exists (a `str` is at most `isize::MAX` bytes), and `value` is capped below `u32::MAX`.
#![allow(clippy::arithmetic_side_effects)]

use markup5ever::data::{C1_REPLACEMENTS, NAMED_ENTITIES};
use memchr::{memchr, memchr2, memchr3};

use super::is_space;

/// See [`super::visible_text`].
pub(super) fn visible_text(html: &str) -> String {
    // The tokenizer drops a byte order mark at the start.
    let html = html.strip_prefix('\u{FEFF}').unwrap_or(html);
    let mut text = Text { out: String::with_capacity(html.len() / 2), pending_space: false };
    Scanner { html, bytes: html.as_bytes(), template_depth: 0 }.run(&mut text);
    text.out
}

/// The text kept so far.
struct Text {
    out: String,
    /// A separator is due before the next text.
    pending_space: bool,
}

/// Bytes that start a character `char::is_whitespace` accepts: ASCII ones, and the lead
/// bytes of U+0085, U+00A0 (C2), U+1680 (E1), U+2000–U+205F (E2) and U+3000 (E3).
static MAY_BE_SPACE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = matches!(b as u8, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ' | 0xC2 | 0xE1 | 0xE2 | 0xE3);
        b += 1;
    }
    table
};

impl Text {
    /// Appends `text`, each run of whitespace (`char::is_whitespace`) a due separator.
    fn push(&mut self, text: &str) {
        let bytes = text.as_bytes();
        let mut piece = 0;
        let mut i = 0;
        while i < bytes.len() {
            if !MAY_BE_SPACE[usize::from(bytes[i])] {
                i += 1;
                continue;
            }
            // One space between two non-spaces stays as it is: the piece goes on.
            if bytes[i] == b' '
                && i > piece
                && bytes.get(i + 1).is_some_and(|&c| !MAY_BE_SPACE[usize::from(c)])
            {
                i += 2;
                continue;
            }
            let space = if bytes[i].is_ascii() {
                1
            } else {
                // A lead byte: `i` is a char boundary.
                text[i..].chars().next().filter(|c| c.is_whitespace()).map_or(0, char::len_utf8)
            };
            if space == 0 {
                i += 1;
                continue;
            }
            self.piece(&text[piece..i]);
            self.pending_space = true;
            i += space;
            piece = i;
        }
        self.piece(&text[piece..]);
    }

    /// Appends text without whitespace.
    fn piece(&mut self, piece: &str) {
        if piece.is_empty() {
            return;
        }
        if self.pending_space && !self.out.is_empty() {
            self.out.push(' ');
        }
        self.pending_space = false;
        self.out.push_str(piece);
    }

    fn push_char(&mut self, c: char) {
        self.push(c.encode_utf8(&mut [0; 4]));
    }
}

/// How the contents of an element that switches the tokenizer out of the data state read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Raw {
    /// Hidden, up to the end tag (script has its own states).
    Hidden,
    /// Shown as written (`<xmp>`).
    Text,
    /// Shown with character references decoded (`<title>`, `<textarea>`).
    Rcdata,
}

struct Scanner<'a> {
    html: &'a str,
    bytes: &'a [u8],
    /// `<template>` contents are tokenized as usual but never rendered.
    template_depth: u32,
}

impl<'a> Scanner<'a> {
    fn run(&mut self, text: &mut Text) {
        let bytes = self.bytes;
        let mut i = 0;
        while i < bytes.len() {
            let Some(found) = memchr3(b'<', b'&', 0, &bytes[i..]) else {
                self.emit(text, i, bytes.len());
                return;
            };
            let at = i + found;
            self.emit(text, i, at);
            i = match bytes[at] {
                b'&' => self.char_ref(text, at),
                // A NUL in data is a parse error and no character.
                0 => at + 1,
                _ => self.markup(text, at),
            };
        }
    }

    fn visible(&self) -> bool {
        self.template_depth == 0
    }

    /// Text between `from` and `to`, both just before an ASCII byte or at the end.
    fn emit(&self, text: &mut Text, from: usize, to: usize) {
        if from < to && self.visible() {
            text.push(&self.html[from..to]);
        }
    }

    /// What starts with the `<` at `at`; returns where the data state resumes.
    fn markup(&mut self, text: &mut Text, at: usize) -> usize {
        let bytes = self.bytes;
        match bytes.get(at + 1) {
            Some(b'!') if bytes.get(at + 2..at + 4).is_some_and(|s| s == b"--") => self.comment_end(at + 4),
            // A doctype, CDATA (a bogus comment outside foreign content) or a bogus comment.
            Some(b'!') => self.after_gt(at + 2),
            Some(b'?') => self.after_gt(at + 2),
            Some(b'/') => match bytes.get(at + 2) {
                Some(c) if c.is_ascii_alphabetic() => {
                    let name_end = self.name_end(at + 2);
                    let Some(next) = self.tag_end(name_end) else { return bytes.len() };
                    self.end_tag(text, &lowercase_name(&bytes[at + 2..name_end]));
                    next
                }
                Some(b'>') => at + 3,
                Some(_) => self.after_gt(at + 2),
                None => {
                    self.emit(text, at, at + 2);
                    at + 2
                }
            },
            Some(c) if c.is_ascii_alphabetic() => {
                let name_end = self.name_end(at + 1);
                let Some(next) = self.tag_end(name_end) else { return bytes.len() };
                let name = lowercase_name(&bytes[at + 1..name_end]);
                self.start_tag(text, &name, next)
            }
            // Not markup: the `<` is text.
            _ => {
                self.emit(text, at, at + 1);
                at + 1
            }
        }
    }

    fn start_tag(&mut self, text: &mut Text, name: &[u8], next: usize) -> usize {
        text.pending_space |= separates_words(name);
        match name {
            b"template" => self.template_depth = self.template_depth.saturating_add(1),
            b"script" => return self.script(next),
            // noscript: as in a browser with scripting on, its contents are raw text and hidden.
            b"style" | b"noscript" | b"iframe" | b"noembed" | b"noframes" => {
                return self.raw(text, name, next, Raw::Hidden)
            }
            b"xmp" => return self.raw(text, name, next, Raw::Text),
            b"title" | b"textarea" => return self.raw(text, name, next, Raw::Rcdata),
            b"plaintext" => {
                self.emit_raw(text, next, self.bytes.len(), Raw::Text);
                return self.bytes.len();
            }
            _ => {}
        }
        next
    }

    fn end_tag(&mut self, text: &mut Text, name: &[u8]) {
        if name == b"template" {
            self.template_depth = self.template_depth.saturating_sub(1);
        } else {
            text.pending_space |= separates_words(name);
        }
    }

    /// Past the first `>` from `from` on (a doctype or a bogus comment), or the end.
    fn after_gt(&self, from: usize) -> usize {
        self.bytes.get(from..).and_then(|rest| memchr(b'>', rest)).map_or(self.bytes.len(), |n| from + n + 1)
    }

    /// Past the comment whose text starts at `from` (after `<!--`): it ends at the first
    /// `-->` or `--!>`, or at once with `>` or `->`; the end of the page ends it too.
    fn comment_end(&self, from: usize) -> usize {
        let bytes = self.bytes;
        if bytes.get(from) == Some(&b'>') {
            return from + 1;
        }
        if bytes.get(from..from + 2).is_some_and(|s| s == b"->") {
            return from + 2;
        }
        let mut k = from;
        while let Some(n) = bytes.get(k..).and_then(|rest| memchr(b'-', rest)) {
            let dash = k + n;
            if bytes.get(dash + 1) == Some(&b'-') {
                match bytes.get(dash + 2) {
                    Some(b'>') => return dash + 3,
                    Some(b'!') if bytes.get(dash + 3) == Some(&b'>') => return dash + 4,
                    _ => {}
                }
            }
            k = dash + 1;
        }
        bytes.len()
    }

    /// The end of the tag name starting at `from`: whitespace, `/` or `>` ends it.
    fn name_end(&self, from: usize) -> usize {
        let rest = self.bytes.get(from..).unwrap_or_default();
        rest.iter()
            .position(|&c| is_space(c) || c == b'/' || c == b'>')
            .map_or(self.bytes.len(), |n| from + n)
    }

    /// Past the `>` of a tag whose attributes start at `k`, skipping them as the tokenizer
    /// reads them (quoted values may hold `>`); `None` when the page ends first, which drops
    /// the tag.
    fn tag_end(&self, mut k: usize) -> Option<usize> {
        let bytes = self.bytes;
        let skip = |mut k: usize, skipped: &dyn Fn(u8) -> bool| {
            while bytes.get(k).is_some_and(|&c| skipped(c)) {
                k += 1;
            }
            k
        };
        loop {
            // Before an attribute name (a `/` not before `>` is ignored).
            k = skip(k, &|c| is_space(c) || c == b'/');
            if *bytes.get(k)? == b'>' {
                return Some(k + 1);
            }
            // The name's first character may be `=`.
            k = skip(k + 1, &|c| !(is_space(c) || matches!(c, b'/' | b'>' | b'=')));
            k = skip(k, &is_space);
            if bytes.get(k) != Some(&b'=') {
                continue;
            }
            k = skip(k + 1, &is_space);
            match *bytes.get(k)? {
                quote @ (b'"' | b'\'') => k = k + 1 + memchr(quote, &bytes[k + 1..])? + 1,
                b'>' => return Some(k + 1),
                _ => k = skip(k, &|c| !(is_space(c) || c == b'>')),
            }
        }
    }

    /// Where the end tag `</name` starting at `at` (a `<`) has its name end, if it closes
    /// the raw text element `name`: the name matches ASCII case-insensitively and is followed
    /// by whitespace, `/` or `>`.
    fn closes(&self, at: usize, name: &[u8]) -> Option<usize> {
        let bytes = self.bytes;
        let start = at + 2;
        let end = start + name.len();
        let closes = bytes.get(at + 1) == Some(&b'/')
            && bytes.get(start..end).is_some_and(|n| n.eq_ignore_ascii_case(name))
            && bytes.get(end).is_some_and(|&c| is_space(c) || c == b'/' || c == b'>');
        closes.then_some(end)
    }

    /// The contents of a raw text or RCDATA element from `from` on, then its end tag.
    fn raw(&mut self, text: &mut Text, name: &[u8], from: usize, kind: Raw) -> usize {
        let bytes = self.bytes;
        let mut k = from;
        while let Some(n) = bytes.get(k..).and_then(|rest| memchr(b'<', rest)) {
            let at = k + n;
            if let Some(name_end) = self.closes(at, name) {
                if kind != Raw::Hidden {
                    self.emit_raw(text, from, at, kind);
                }
                let Some(next) = self.tag_end(name_end) else { return bytes.len() };
                if kind != Raw::Hidden {
                    self.end_tag(text, name);
                }
                return next;
            }
            k = at + 1;
        }
        if kind != Raw::Hidden {
            self.emit_raw(text, from, bytes.len(), kind);
        }
        bytes.len()
    }

    /// Raw text: NULs become U+FFFD, and in RCDATA character references are decoded.
    fn emit_raw(&self, text: &mut Text, from: usize, to: usize, kind: Raw) {
        if !self.visible() {
            return;
        }
        let bytes = &self.bytes[..to];
        let mut i = from;
        while i < to {
            let found =
                if kind == Raw::Rcdata { memchr2(0, b'&', &bytes[i..]) } else { memchr(0, &bytes[i..]) };
            let Some(found) = found else { break };
            let at = i + found;
            self.emit(text, i, at);
            i = if bytes[at] == 0 {
                text.push_char(char::REPLACEMENT_CHARACTER);
                at + 1
            } else {
                // A reference never reaches the `<` at `to`.
                self.char_ref(text, at)
            };
        }
        self.emit(text, i, to);
    }

    /// Past a script's contents from `from` on and its end tag, following the script data
    /// states: inside `<!--`, a `<script` opens a nested, "double escaped" part where
    /// `</script>` does not end the element, up to its own `</script` or `-->`.
    fn script(&self, from: usize) -> usize {
        let bytes = self.bytes;
        let end = self.script_end(from);
        end.and_then(|name_end| self.tag_end(name_end)).unwrap_or(bytes.len())
    }

    /// Where the name of the `</script` that ends a script starting at `from` ends.
    fn script_end(&self, from: usize) -> Option<usize> {
        #[derive(Clone, Copy, PartialEq, Eq)]
        enum State {
            Data,
            Escaped,
            DoubleEscaped,
        }
        let bytes = self.bytes;
        let script_delimited = |name_start: usize| {
            let name_end =
                name_start + bytes[name_start..].iter().take_while(|c| c.is_ascii_alphabetic()).count();
            let script = bytes[name_start..name_end].eq_ignore_ascii_case(b"script")
                && bytes.get(name_end).is_some_and(|&c| is_space(c) || c == b'/' || c == b'>');
            (script, name_end)
        };
        let mut state = State::Data;
        let mut k = from;
        loop {
            if state == State::Data {
                let at = k + memchr(b'<', bytes.get(k..)?)?;
                match bytes.get(at + 1) {
                    Some(b'/') => {
                        if let Some(name_end) = self.closes(at, b"script") {
                            return Some(name_end);
                        }
                        k = at + 2;
                    }
                    // `<!--` leaves the tokenizer after two dashes: counted in the run below.
                    Some(b'!') if bytes.get(at + 2..at + 4).is_some_and(|s| s == b"--") => {
                        state = State::Escaped;
                        k = at + 2;
                    }
                    _ => k = at + 1,
                }
                continue;
            }
            let at = k + memchr2(b'-', b'<', bytes.get(k..)?)?;
            if bytes[at] == b'-' {
                let run = bytes[at..].iter().take_while(|&&c| c == b'-').count();
                k = at + run;
                if run >= 2 && bytes.get(k) == Some(&b'>') {
                    state = State::Data;
                    k += 1;
                }
                continue;
            }
            match (state, bytes.get(at + 1)) {
                (State::Escaped, Some(b'/')) => {
                    if let Some(name_end) = self.closes(at, b"script") {
                        return Some(name_end);
                    }
                    k = at + 2;
                }
                (State::Escaped, Some(c)) if c.is_ascii_alphabetic() => {
                    let (script, name_end) = script_delimited(at + 1);
                    if script {
                        state = State::DoubleEscaped;
                    }
                    k = name_end;
                }
                (State::DoubleEscaped, Some(b'/')) => {
                    let (script, name_end) = script_delimited(at + 2);
                    if script {
                        state = State::Escaped;
                    }
                    k = name_end;
                }
                _ => k = at + 1,
            }
        }
    }

    /// The character reference starting with the `&` at `at`, as text: decoded, or the `&`
    /// itself when nothing matches. Returns where reading resumes.
    fn char_ref(&self, text: &mut Text, at: usize) -> usize {
        let bytes = self.bytes;
        let visible = self.visible();
        match bytes.get(at + 1) {
            Some(b'#') => {
                let (base, digits) = match bytes.get(at + 2) {
                    Some(b'x' | b'X') => (16, at + 3),
                    _ => (10, at + 2),
                };
                let mut value: u32 = 0;
                let mut k = digits;
                while let Some(digit) = bytes.get(k).and_then(|&c| char::from(c).to_digit(base)) {
                    // Anything past U+10FFFF is U+FFFD, however far past.
                    value = (value * base + digit).min(0x11_0000);
                    k += 1;
                }
                if k == digits {
                    // No digits: `&#` or `&#x` is text.
                    if visible {
                        text.push("&");
                    }
                    return at + 1;
                }
                if bytes.get(k) == Some(&b';') {
                    k += 1;
                }
                if visible {
                    text.push_char(numeric_reference(value));
                }
                k
            }
            Some(c) if c.is_ascii_alphanumeric() => {
                // The longest name in the table that the text starts with: the table holds every
                // prefix of a name (as (0, 0)), so the walk stops where no name can continue.
                let mut longest = None;
                let mut k = at + 1;
                while bytes.get(k).is_some_and(|&c| c.is_ascii_alphanumeric() || c == b';') {
                    k += 1;
                    match NAMED_ENTITIES.get(&self.html[at + 1..k]) {
                        None => break,
                        Some(&(0, _)) => {}
                        Some(&chars) => longest = Some((k, chars)),
                    }
                }
                let Some((end, (first, second))) = longest else {
                    if visible {
                        text.push("&");
                    }
                    return at + 1;
                };
                if visible {
                    for c in [first, second].into_iter().filter(|&c| c != 0).filter_map(char::from_u32) {
                        text.push_char(c);
                    }
                }
                end
            }
            _ => {
                if visible {
                    text.push("&");
                }
                at + 1
            }
        }
    }
}

/// The character a numeric reference stands for, as the tokenizer maps it.
fn numeric_reference(value: u32) -> char {
    match value {
        0 | 0xD800..=0xDFFF | 0x11_0000.. => char::REPLACEMENT_CHARACTER,
        // Windows-1252's characters, where it has one.
        0x80..=0x9F => C1_REPLACEMENTS
            .get((value - 0x80) as usize)
            .copied()
            .flatten()
            .or_else(|| char::from_u32(value))
            .unwrap_or(char::REPLACEMENT_CHARACTER),
        _ => char::from_u32(value).unwrap_or(char::REPLACEMENT_CHARACTER),
    }
}

/// A tag name ASCII-lowercased if it may be one of the names that matter (at most 10
/// bytes), else empty.
fn lowercase_name(name: &[u8]) -> NameBuf {
    let mut buf = NameBuf { bytes: [0; 10], len: 0 };
    if let Some(slot) = buf.bytes.get_mut(..name.len()) {
        slot.copy_from_slice(name);
        slot.make_ascii_lowercase();
        buf.len = name.len();
    }
    buf
}

struct NameBuf {
    bytes: [u8; 10],
    len: usize,
}

impl std::ops::Deref for NameBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or_default()
    }
}

/// Elements rendered as blocks, list items, table parts or line breaks by browsers' default
/// style sheets: their boundaries separate words.
fn separates_words(name: &[u8]) -> bool {
    matches!(
        name,
        b"address"
            | b"article"
            | b"aside"
            | b"blockquote"
            | b"body"
            | b"br"
            | b"caption"
            | b"center"
            | b"dd"
            | b"details"
            | b"dialog"
            | b"dir"
            | b"div"
            | b"dl"
            | b"dt"
            | b"fieldset"
            | b"figcaption"
            | b"figure"
            | b"footer"
            | b"form"
            | b"frameset"
            | b"h1"
            | b"h2"
            | b"h3"
            | b"h4"
            | b"h5"
            | b"h6"
            | b"head"
            | b"header"
            | b"hgroup"
            | b"hr"
            | b"html"
            | b"legend"
            | b"li"
            | b"listing"
            | b"main"
            | b"menu"
            | b"nav"
            | b"ol"
            | b"optgroup"
            | b"option"
            | b"p"
            | b"plaintext"
            | b"pre"
            | b"search"
            | b"section"
            | b"select"
            | b"summary"
            | b"table"
            | b"tbody"
            | b"td"
            | b"textarea"
            | b"tfoot"
            | b"th"
            | b"thead"
            | b"title"
            | b"tr"
            | b"ul"
            | b"xmp"
    )
}
