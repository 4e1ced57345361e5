//! The diff stage's visible-text extraction as it was before the byte scanner
//! (`recrawl_diff::text::visible_text`): html5ever's tokenizer with a sink that keeps the
//! text. Kept only as the reference the scanner is compared with, by the corpus test
//! (`tests/text_corpus.rs`) and the `text` bench; html5ever is a dev-dependency.

#![allow(dead_code, clippy::arithmetic_side_effects)]

use std::borrow::Cow;
use std::cell::RefCell;

use html5ever::local_name;
use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use html5ever::LocalName;

/// HTML's ASCII whitespace.
fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0C | b'\r' | b' ')
}

/// Most attributes of one tag the tokenizer is given. html5ever compares each attribute
/// of a tag with all the tag's earlier ones, so a tag of n attributes costs n²/2
/// comparisons: 150,000 in a 1 MB page took 14 s, the 8 MiB a page may have would take
/// a quarter of an hour. Attributes carry no visible text, and real tags have a few dozen.
const MAX_TAG_ATTRIBUTES: usize = 256;

/// `html` with each tag's attributes past the [`MAX_TAG_ATTRIBUTES`]th dropped, read as
/// the tokenizer reads a tag in text: name, then names and values (quoted, unquoted or
/// none) up to `>`. A page without such a tag is returned as it is. Something that only
/// looks like a tag (in a script, a comment) is cut the same way: only a page that has
/// one of that size loses anything.
fn with_bounded_attributes(html: &str) -> Cow<'_, str> {
    let bytes = html.as_bytes();
    let at = |index: usize| bytes.get(index).copied();
    let mut bounded = String::new();
    let mut copied = 0;
    let mut from = 0;
    while let Some(open) = bytes.get(from..).and_then(|rest| memchr::memchr(b'<', rest)) {
        let open = from.saturating_add(open);
        let name = skip_while(bytes, open.saturating_add(1), |b| b == b'/');
        from = name;
        if !at(name).is_some_and(|b| b.is_ascii_alphabetic()) {
            continue;
        }
        let mut index = skip_while(bytes, name, |b| !(is_space(b) || b == b'/' || b == b'>'));
        let mut attributes = 0_usize;
        let mut cut = None;
        let end = loop {
            index = skip_while(bytes, index, |b| is_space(b) || b == b'/');
            match at(index) {
                None => break bytes.len(),
                Some(b'>') => break index,
                // A name's first character may be `=`; the rest end at `=`.
                Some(_) => {
                    index =
                        skip_while(bytes, index.saturating_add(1), |b| !(is_space(b) || b"/>=".contains(&b)))
                }
            }
            index = skip_while(bytes, index, is_space);
            if at(index) == Some(b'=') {
                index = skip_while(bytes, index.saturating_add(1), is_space);
                index = match at(index) {
                    Some(quote @ (b'"' | b'\'')) => {
                        let value = index.saturating_add(1);
                        let closing = bytes.get(value..).and_then(|rest| memchr::memchr(quote, rest));
                        closing.map_or(bytes.len(), |n| value.saturating_add(n).saturating_add(1))
                    }
                    _ => skip_while(bytes, index, |b| !(is_space(b) || b == b'>')),
                };
            }
            attributes = attributes.saturating_add(1);
            if attributes == MAX_TAG_ATTRIBUTES {
                cut = Some(index);
            }
        };
        let cut = cut.filter(|_| attributes > MAX_TAG_ATTRIBUTES);
        if let Some(kept) = cut.and_then(|cut| html.get(copied..cut)) {
            bounded.push_str(kept);
            copied = end;
        }
        from = end;
    }
    if copied == 0 {
        return Cow::Borrowed(html);
    }
    bounded.push_str(html.get(copied..).unwrap_or_default());
    Cow::Owned(bounded)
}

/// The first index from `index` on whose byte is not `while_byte`, or the length.
fn skip_while(bytes: &[u8], index: usize, while_byte: impl Fn(u8) -> bool) -> usize {
    let skipped = bytes.get(index..).and_then(|rest| rest.iter().position(|&b| !while_byte(b)));
    skipped.map_or(bytes.len(), |n| index.saturating_add(n))
}

/// The text of `html` a reader sees, whitespace runs collapsed to one space and trimmed.
///
/// Drops the contents of `<script>`, `<style>`, `<noscript>`, `<template>`, `<iframe>`,
/// `<noembed>` and `<noframes>`, comments, the doctype and attributes; decodes character
/// references; block-level elements and `<br>` separate words, inline ones do not.
pub fn visible_text_html5ever(html: &str) -> String {
    let html = &*with_bounded_attributes(html);
    let tokenizer = Tokenizer::new(TextSink::default(), TokenizerOpts::default());
    let input = BufferQueue::default();
    // A tendril holds at most 4 GiB; cut large inputs into pieces at char boundaries.
    const PIECE: usize = 1 << 24;
    let mut rest = html;
    while !rest.is_empty() {
        let end =
            (0..=rest.len().min(PIECE)).rev().find(|&end| rest.is_char_boundary(end)).unwrap_or_default();
        input.push_back(StrTendril::from_slice(&rest[..end]));
        rest = &rest[end..];
    }
    // The sink never blocks on a script or asks for a re-decode, so one feed reads it all.
    let _ = tokenizer.feed(&input);
    tokenizer.end();
    tokenizer.sink.state.into_inner().out
}

#[derive(Debug, Default)]
struct TextSink {
    state: RefCell<TextState>,
}

#[derive(Debug, Default)]
struct TextState {
    out: String,
    /// A separator is due before the next text.
    pending_space: bool,
    /// Inside an element whose raw text is not shown (script, style, ...).
    in_hidden_raw: bool,
    /// `<template>` contents are tokenized as usual but never rendered.
    template_depth: u32,
}

impl TokenSink for TextSink {
    type Handle = ();

    fn process_token(&self, token: Token, _line_number: u64) -> TokenSinkResult<()> {
        let mut state = self.state.borrow_mut();
        match token {
            Token::CharacterTokens(text) if !state.in_hidden_raw && state.template_depth == 0 => {
                state.push_text(&text);
            }
            Token::TagToken(tag) => return state.tag(&tag),
            // Comments, the doctype, NULs (ignored in data) and errors carry no visible text.
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

impl TextState {
    fn push_text(&mut self, text: &str) {
        let mut first = true;
        for piece in text.split(char::is_whitespace) {
            // Consecutive pieces were separated by whitespace.
            self.pending_space |= !first;
            first = false;
            if !piece.is_empty() {
                if self.pending_space && !self.out.is_empty() {
                    self.out.push(' ');
                }
                self.pending_space = false;
                self.out.push_str(piece);
            }
        }
    }

    /// Switches the tokenizer into the text states a tree builder would, since only it
    /// knows that `<script>` contents are not markup.
    fn tag(&mut self, tag: &Tag) -> TokenSinkResult<()> {
        if tag.kind == TagKind::EndTag {
            if self.in_hidden_raw {
                // In a raw-text state the only end tag the tokenizer emits is the one closing it.
                self.in_hidden_raw = false;
            } else if tag.name == local_name!("template") {
                self.template_depth = self.template_depth.saturating_sub(1);
            } else {
                self.pending_space |= separates_words(&tag.name);
            }
            return TokenSinkResult::Continue;
        }
        self.pending_space |= separates_words(&tag.name);
        match tag.name {
            local_name!("template") => self.template_depth = self.template_depth.saturating_add(1),
            local_name!("script") => {
                self.in_hidden_raw = true;
                return TokenSinkResult::RawData(RawKind::ScriptData);
            }
            // noscript: as in a browser with scripting on, its contents are raw text and hidden.
            local_name!("style")
            | local_name!("noscript")
            | local_name!("iframe")
            | local_name!("noembed")
            | local_name!("noframes") => {
                self.in_hidden_raw = true;
                return TokenSinkResult::RawData(RawKind::Rawtext);
            }
            local_name!("xmp") => return TokenSinkResult::RawData(RawKind::Rawtext),
            local_name!("title") | local_name!("textarea") => {
                return TokenSinkResult::RawData(RawKind::Rcdata)
            }
            local_name!("plaintext") => return TokenSinkResult::Plaintext,
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

/// Elements rendered as blocks, list items, table parts or line breaks by browsers' default
/// style sheets: their boundaries separate words.
fn separates_words(name: &LocalName) -> bool {
    matches!(
        *name,
        local_name!("address")
            | local_name!("article")
            | local_name!("aside")
            | local_name!("blockquote")
            | local_name!("body")
            | local_name!("br")
            | local_name!("caption")
            | local_name!("center")
            | local_name!("dd")
            | local_name!("details")
            | local_name!("dialog")
            | local_name!("dir")
            | local_name!("div")
            | local_name!("dl")
            | local_name!("dt")
            | local_name!("fieldset")
            | local_name!("figcaption")
            | local_name!("figure")
            | local_name!("footer")
            | local_name!("form")
            | local_name!("frameset")
            | local_name!("h1")
            | local_name!("h2")
            | local_name!("h3")
            | local_name!("h4")
            | local_name!("h5")
            | local_name!("h6")
            | local_name!("head")
            | local_name!("header")
            | local_name!("hgroup")
            | local_name!("hr")
            | local_name!("html")
            | local_name!("legend")
            | local_name!("li")
            | local_name!("listing")
            | local_name!("main")
            | local_name!("menu")
            | local_name!("nav")
            | local_name!("ol")
            | local_name!("optgroup")
            | local_name!("option")
            | local_name!("p")
            | local_name!("plaintext")
            | local_name!("pre")
            | local_name!("search")
            | local_name!("section")
            | local_name!("select")
            | local_name!("summary")
            | local_name!("table")
            | local_name!("tbody")
            | local_name!("td")
            | local_name!("textarea")
            | local_name!("tfoot")
            | local_name!("th")
            | local_name!("thead")
            | local_name!("title")
            | local_name!("tr")
            | local_name!("ul")
            | local_name!("xmp")
    )
}
