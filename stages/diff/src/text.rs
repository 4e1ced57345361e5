//! From a fetched body to the sequence of word hashes that change degrees compare. Pure: no
//! Kafka, so the stage, benches and offline tools share it.
//!
//! Three steps: [`decode_body`] picks the charset as browsers do (BOM, HTTP header, `<meta>`
//! prescan, then UTF-8 or `chardetng` detection); [`visible_text`] keeps the text a reader sees;
//! [`word_hashes`] splits it into UAX #29 words and hashes each with xxh3-64.
//!
//! The HTML step is a hand-written scanner over the WHATWG tokenizer states that decide what
//! is text (`text/scan.rs`). It replaced html5ever's tokenizer with a text-keeping sink, the
//! stage's main cost (~190 µs for a 10 KB page), and gives the same words on real pages
//! (`tests/text_corpus.rs` compares it with that implementation, kept in
//! `tests/support/html5ever_text.rs`). It decodes character references as html5ever does
//! (html5ever's own table of names, legacy forms without `;`, numeric references), which
//! `lol_html` does not: it hands text through with references undecoded and possibly split
//! mid-reference, and measured only ~1.6× faster than html5ever on a 10 KB page.

use std::borrow::Cow;

use chardetng::{EncodingDetector, Iso2022JpDetection, Utf8Detection};
use encoding_rs::{Encoding, UTF_16BE, UTF_16LE, UTF_8, WINDOWS_1252, X_USER_DEFINED};
use serde::{Deserialize, Serialize};
use unicode_segmentation::UnicodeSegmentation;
use xxhash_rust::xxh3::xxh3_64;

mod scan;

/// How far browsers look for a `<meta>` charset declaration.
const PRESCAN_BYTES: usize = 1024;

/// How many non-ASCII bytes of an undeclared, non-UTF-8 body the detector reads.
const DETECT_NON_ASCII: usize = 4096;

/// Where the encoding of a body came from, strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodingSource {
    Bom,
    Header,
    Meta,
    /// No declaration, and the body is valid UTF-8.
    Utf8,
    /// No declaration; guessed by `chardetng`.
    Detected,
}

/// A body decoded to text.
#[derive(Debug)]
pub struct Decoded<'a> {
    /// Malformed input became U+FFFD; a BOM is not part of it.
    pub text: Cow<'a, str>,
    pub encoding: &'static Encoding,
    pub source: EncodingSource,
}

/// Decodes `body` with the encoding a browser would pick: a BOM, else the `charset` of the
/// `Content-Type` header, else a `<meta>` declaration in the first 1024 bytes, else UTF-8 if
/// the body is valid UTF-8, else `chardetng`'s guess. Unknown labels are ignored.
pub fn decode_body<'a>(body: &'a [u8], content_type: Option<&str>) -> Decoded<'a> {
    if let Some((encoding, bom_len)) = Encoding::for_bom(body) {
        return decode_as(&body[bom_len..], encoding, EncodingSource::Bom);
    }
    if let Some(encoding) = content_type.and_then(header_charset) {
        return decode_as(body, encoding, EncodingSource::Header);
    }
    if let Some(encoding) = prescan(body) {
        return decode_as(body, encoding, EncodingSource::Meta);
    }
    if let Ok(text) = std::str::from_utf8(body) {
        return Decoded { text: Cow::Borrowed(text), encoding: UTF_8, source: EncodingSource::Utf8 };
    }
    // chardetng costs ~150 ns per non-ASCII byte (ASCII is no evidence to it, and nearly free)
    // and its verdict settles long before the end of a large page.
    let end = body
        .iter()
        .enumerate()
        .filter(|(_, b)| !b.is_ascii())
        .nth(DETECT_NON_ASCII)
        .map_or(body.len(), |(i, _)| i);
    let mut detector = EncodingDetector::new(Iso2022JpDetection::Deny);
    detector.feed(&body[..end], end == body.len());
    // The body is not valid UTF-8, so UTF-8 cannot be the answer; no TLD is known here.
    let encoding = detector.guess(None, Utf8Detection::Deny);
    decode_as(body, encoding, EncodingSource::Detected)
}

fn decode_as<'a>(bytes: &'a [u8], encoding: &'static Encoding, source: EncodingSource) -> Decoded<'a> {
    let (text, _had_errors) = encoding.decode_without_bom_handling(bytes);
    Decoded { text, encoding, source }
}

/// The encoding named by the `charset` parameter of a `Content-Type` value.
fn header_charset(content_type: &str) -> Option<&'static Encoding> {
    let value = content_type.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        name.trim().eq_ignore_ascii_case("charset").then_some(value)
    })?;
    let value = value.trim();
    let value = value.strip_prefix('"').map_or(value, |v| v.strip_suffix('"').unwrap_or(v));
    Encoding::for_label(value.as_bytes())
}

/// HTML's ASCII whitespace: the bytes `u8::is_ascii_whitespace` accepts and
/// `trim_ascii_start` trims.
fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0C | b'\r' | b' ')
}

/// The WHATWG "prescan a byte stream to determine its encoding" over the first 1024 bytes.
/// Running out of bytes mid-construct ends the prescan with nothing, as the algorithm says;
/// the `?`s below do that. `rest` is what is left to read.
fn prescan(body: &[u8]) -> Option<&'static Encoding> {
    let mut rest = &body[..body.len().min(PRESCAN_BYTES)];
    while !rest.is_empty() {
        if rest.starts_with(b"<!--") {
            // The dashes of "-->" may overlap the opening ones: "<!-->" is a whole comment.
            let comment = &rest[2..];
            rest = &comment[find(comment, b"-->")?..][2..];
        } else if rest.len() > 5
            && rest[..5].eq_ignore_ascii_case(b"<meta")
            && (is_space(rest[5]) || rest[5] == b'/')
        {
            rest = &rest[5..];
            if let Some(encoding) = meta_charset(&mut rest)? {
                return Some(encoding);
            }
        } else if rest.len() > 2
            && rest[0] == b'<'
            && (rest[1].is_ascii_alphabetic() || (rest[1] == b'/' && rest[2].is_ascii_alphabetic()))
        {
            rest = &rest[rest.iter().position(|&c| is_space(c) || c == b'>')?..];
            while attribute(&mut rest)?.is_some() {}
        } else if rest.starts_with(b"<!") || rest.starts_with(b"</") || rest.starts_with(b"<?") {
            rest = &rest[rest.iter().position(|&c| c == b'>')?..];
        }
        // Past the byte each case stopped at.
        rest = rest.get(1..).unwrap_or_default();
    }
    None
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The attributes of one `<meta>` tag: `Some(None)` when it declares no usable charset, `None`
/// when the bytes run out.
fn meta_charset(rest: &mut &[u8]) -> Option<Option<&'static Encoding>> {
    let mut seen: Vec<Vec<u8>> = Vec::new();
    let mut got_pragma = false;
    let mut need_pragma = None;
    let mut charset = None;
    while let Some((name, value)) = attribute(rest)? {
        if seen.contains(&name) {
            continue;
        }
        match name.as_slice() {
            b"http-equiv" => got_pragma |= value == b"content-type",
            b"content" if charset.is_none() => {
                if let Some(encoding) = charset_in_content(&value).and_then(Encoding::for_label) {
                    charset = Some(encoding);
                    need_pragma = Some(true);
                }
            }
            b"charset" => {
                charset = Encoding::for_label(&value);
                need_pragma = Some(false);
            }
            _ => {}
        }
        seen.push(name);
    }
    let declared = match need_pragma {
        None => false,
        Some(need) => got_pragma || !need,
    };
    // A document that could be read as ASCII to find this declaration is not UTF-16.
    Some(charset.filter(|_| declared).map(|encoding| match encoding {
        e if e == UTF_16BE || e == UTF_16LE => UTF_8,
        e if e == X_USER_DEFINED => WINDOWS_1252,
        e => e,
    }))
}

/// A lowercased attribute name and value.
type Attribute = (Vec<u8>, Vec<u8>);

/// The WHATWG "get an attribute" step of the prescan: name and value ASCII-lowercased;
/// `Some(None)` at the end of the tag, `None` when the bytes run out. Moves `rest` past the
/// attribute.
fn attribute(rest: &mut &[u8]) -> Option<Option<Attribute>> {
    *rest = &rest[rest.iter().position(|&c| !is_space(c) && c != b'/')?..];
    if rest[0] == b'>' {
        return Some(None);
    }
    // The first byte is part of the name even if it is '='.
    let end = (1..rest.len()).find(|&i| matches!(rest[i], b'=' | b'/' | b'>') || is_space(rest[i]))?;
    let name = rest[..end].to_ascii_lowercase();
    *rest = rest[end..].trim_ascii_start();
    if *rest.first()? != b'=' {
        return Some(Some((name, Vec::new())));
    }
    *rest = rest[1..].trim_ascii_start();
    let value = match *rest.first()? {
        quote @ (b'"' | b'\'') => {
            let quoted = &rest[1..];
            let end = quoted.iter().position(|&c| c == quote)?;
            *rest = &quoted[end..][1..];
            &quoted[..end]
        }
        b'>' => &[],
        _ => {
            let end = rest.iter().position(|&c| is_space(c) || c == b'>')?;
            let value = &rest[..end];
            *rest = &rest[end..];
            value
        }
    };
    Some(Some((name, value.to_ascii_lowercase())))
}

/// The WHATWG "extracting a character encoding from a meta element" on a `content` value:
/// the label after `charset=`, quoted or up to whitespace or `;`.
fn charset_in_content(content: &[u8]) -> Option<&[u8]> {
    let mut rest = content;
    let label = loop {
        let at = rest.windows(7).position(|w| w.eq_ignore_ascii_case(b"charset"))?;
        rest = rest[at..][7..].trim_ascii_start();
        if let Some(label) = rest.strip_prefix(b"=") {
            break label.trim_ascii_start();
        }
    };
    match *label.first()? {
        quote @ (b'"' | b'\'') => {
            let quoted = &label[1..];
            Some(&quoted[..quoted.iter().position(|&c| c == quote)?])
        }
        _ => label.split(|&c| is_space(c) || c == b';').next(),
    }
}

/// The text of `html` a reader sees, whitespace runs collapsed to one space and trimmed.
///
/// Drops the contents of `<script>`, `<style>`, `<noscript>`, `<template>`, `<iframe>`,
/// `<noembed>` and `<noframes>`, comments, the doctype and attributes; decodes character
/// references; block-level elements and `<br>` separate words, inline ones do not.
///
/// One pass over the bytes (`text/scan.rs`) through the WHATWG tokenizer states that decide
/// what is text, giving what html5ever's tokenizer gives (the corpus test compares them).
pub fn visible_text(html: &str) -> String {
    scan::visible_text(html)
}

/// Case folding applied to each word before hashing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CaseFold {
    /// Words are hashed as written.
    #[default]
    None,
    /// Unicode lower case (`str::to_lowercase`).
    Lower,
}

/// The words of `text`: exactly `text.unicode_words()` (UAX #29 segments holding a letter or
/// digit), faster on mostly-ASCII text. For the hot path see [`for_each_word`].
pub fn words(text: &str) -> impl Iterator<Item = &str> {
    let mut words = Vec::new();
    for_each_word(text, |word| words.push(word));
    words.into_iter()
}

/// xxh3-64 of each word of `text`, after `fold`.
pub fn word_hashes(text: &str, fold: CaseFold) -> Vec<u64> {
    let mut hashes = Vec::with_capacity(text.len() / 6);
    match fold {
        CaseFold::None => for_each_word(text, |word| hashes.push(xxh3_64(word.as_bytes()))),
        CaseFold::Lower => {
            let mut scratch = String::new();
            for_each_word(text, |word| hashes.push(xxh3_64(lowercase(word, &mut scratch).as_bytes())));
        }
    }
    hashes
}

/// `word.to_lowercase()`, borrowing when nothing changes and otherwise reusing `scratch`.
fn lowercase<'a>(word: &'a str, scratch: &'a mut String) -> &'a str {
    if word.is_ascii() {
        if !word.bytes().any(|b| b.is_ascii_uppercase()) {
            return word;
        }
        scratch.clear();
        scratch.push_str(word);
        scratch.make_ascii_lowercase();
    } else if word.contains('Σ') {
        // Final sigma depends on context, which only `str::to_lowercase` implements.
        *scratch = word.to_lowercase();
    } else {
        scratch.clear();
        scratch.extend(word.chars().flat_map(char::to_lowercase));
    }
    scratch
}

/// Calls `f` with each word of `text`, as [`words`] yields them.
///
/// The text is cut into pieces where no UAX #29 rule looks across (see `is_safe_cut`):
/// pure-ASCII pieces go through a table-driven byte scanner, the rest through `unicode_words`.
/// A callback rather than an iterator: the scanner's loops run about twice as fast inline.
pub fn for_each_word<'a>(text: &'a str, mut f: impl FnMut(&'a str)) {
    let mut rest = text;
    while !rest.is_empty() {
        let b = rest.as_bytes();
        let Some(first_non_ascii) = b.iter().position(|c| !c.is_ascii()) else {
            return ascii_words(rest, f);
        };
        let cut_before = |i: usize| b[..i].last().is_some_and(|&before| is_safe_cut(before, b[i]));
        let ascii_end = (1..first_non_ascii).rev().find(|&i| cut_before(i)).unwrap_or(0);
        ascii_words(&rest[..ascii_end], &mut f);
        // No cut is safe next to the non-ASCII byte.
        let end = (first_non_ascii..b.len()).find(|&i| cut_before(i)).unwrap_or(b.len());
        rest[ascii_end..end].unicode_words().for_each(&mut f);
        rest = &rest[end..];
    }
}

/// Whether a word boundary between bytes `a` and `b` is certain whatever surrounds them, so the
/// text on either side segments alone as it does in place. True when both are ASCII and `a`
/// is none of: a letter, digit or `_` (which join what follows), a mid-word or mid-number
/// character `.` `'` `:` `,` `;` (rules WB6/7/11/12 look across them), CR (CR × LF), or a space
/// followed by another (WB3d). The rules looking further (WB6/7/7b/7c/11/12, WB15/16) then
/// never reach across `a`/`b`, and an ASCII `b` is never Extend/Format/ZWJ (WB4).
fn is_safe_cut(a: u8, b: u8) -> bool {
    a.is_ascii() && b.is_ascii() && CLASS[usize::from(a)] == 0 && a != b'\r' && !(a == b' ' && b == b' ')
}

/// Byte classes of the ASCII word scanner (UAX #29 Word_Break values, as far as ASCII has them).
const WORD: u8 = 1; // ALetter, Numeric, ExtendNumLet: runs of these are never broken
const LETTER: u8 = 2;
const DIGIT: u8 = 4;
const MID_LETTER: u8 = 8; // MidLetter or MidNumLetQ: joins letter to letter (WB6/7)
const MID_NUM: u8 = 16; // MidNum or MidNumLetQ: joins digit to digit (WB11/12)

static CLASS: [u8; 256] = {
    let mut class = [0; 256];
    let mut b = 0;
    while b < 128 {
        class[b] = match b as u8 {
            b'a'..=b'z' | b'A'..=b'Z' => WORD | LETTER,
            b'0'..=b'9' => WORD | DIGIT,
            b'_' => WORD,
            b'.' | b'\'' => MID_LETTER | MID_NUM,
            b':' => MID_LETTER,
            b',' | b';' => MID_NUM,
            _ => 0,
        };
        b += 1;
    }
    class
};

/// The words of an ASCII text by UAX #29: runs of letters, digits and `_`, joined across one
/// `.` `'` `:` between letters or one `.` `'` `,` `;` between digits; runs without a letter
/// or digit (`_`, `__`) are not words.
// Allowed, the hot loop: `i` never passes `b.len()`, as every step checks `i < b.len()` or
// `i + 1 < b.len()` first, and `i - 1` follows a step over a word byte, so i ≥ 1.
#[allow(clippy::arithmetic_side_effects)]
fn ascii_words<'a>(text: &'a str, mut f: impl FnMut(&'a str)) {
    let b = text.as_bytes();
    let class = |i: usize| CLASS[usize::from(b[i])];
    let mut i = 0;
    loop {
        while i < b.len() && class(i) & WORD == 0 {
            i += 1;
        }
        if i == b.len() {
            return;
        }
        let start = i;
        loop {
            while i < b.len() && class(i) & WORD != 0 {
                i += 1;
            }
            if i + 1 < b.len() {
                let (before, mid, after) = (class(i - 1), class(i), class(i + 1));
                let joined = before & after;
                if (joined & LETTER != 0 && mid & MID_LETTER != 0)
                    || (joined & DIGIT != 0 && mid & MID_NUM != 0)
                {
                    i += 2;
                    continue;
                }
            }
            break;
        }
        let word = &text[start..i];
        if b[start] != b'_' || word.bytes().any(|c| c.is_ascii_alphanumeric()) {
            f(word);
        }
    }
}

/// The words of a page and the hash of its visible text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageText {
    /// xxh3-64 of each word (after case folding), in page order.
    pub words: Vec<u64>,
    /// xxh3-64 of the visible text with whitespace collapsed, before case folding: equal for
    /// bodies that differ only in markup.
    pub text_hash: u64,
    /// The WHATWG name of the encoding the body was decoded with.
    pub encoding: &'static str,
}

/// Decodes `body`, extracts its visible text and hashes its words.
pub fn page_words(body: &[u8], content_type: Option<&str>, fold: CaseFold) -> PageText {
    let decoded = decode_body(body, content_type);
    let text = visible_text(&decoded.text);
    PageText {
        words: word_hashes(&text, fold),
        text_hash: xxh3_64(text.as_bytes()),
        encoding: decoded.encoding.name(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use encoding_rs::{EUC_KR, UTF_16LE};
    use proptest::prelude::*;

    const KOREAN: &str = "한국어 웹 문서 똠방각하. 이 문서는 인터넷에서 내려받은 웹 페이지의 본문이 얼마나 \
        바뀌었는지 재는 시험용 문장입니다. 검색 엔진은 웹 문서를 주기적으로 다시 내려받아 최신 상태로 \
        유지합니다.";

    fn euc_kr(html: &str) -> Vec<u8> {
        let (bytes, _, unmappable) = EUC_KR.encode(html);
        assert!(!unmappable);
        bytes.into_owned()
    }

    fn korean_page(head: &str) -> Vec<u8> {
        euc_kr(&format!("<html><head>{head}<title>한국어</title></head><body><p>{KOREAN}</p></body></html>"))
    }

    #[test]
    fn euc_kr_from_the_header_includes_cp949_syllables() {
        let body = korean_page("");
        for header in [
            "text/html; charset=EUC-KR",
            "text/html;charset=\"euc-kr\"",
            "text/html; Charset = ks_c_5601-1987",
        ] {
            let decoded = decode_body(&body, Some(header));
            assert_eq!((decoded.encoding, decoded.source), (EUC_KR, EncodingSource::Header), "{header}");
            assert!(decoded.text.contains("한국어 웹 문서 똠방각하"));
            assert!(!decoded.text.contains('\u{FFFD}'));
        }
    }

    #[test]
    fn euc_kr_from_a_meta_declaration() {
        for meta in [
            "<meta charset=euc-kr>",
            "<META CHARSET='EUC-KR'/>",
            "<meta charset=\"euc-kr\">",
            "<meta http-equiv=\"Content-Type\" content=\"text/html; charset=euc-kr\">",
            "<meta content='text/html;charset=\"euc-kr\"' http-equiv=content-type>",
            "<!-- <meta charset=utf-8> --><link rel=x href='<meta charset=utf-8>'><meta charset=euc-kr>",
        ] {
            let body = korean_page(meta);
            // A header without a charset, or with an unknown one, leaves the choice to the body.
            for header in [None, Some("text/html"), Some("text/html; charset=no-such-thing")] {
                let decoded = decode_body(&body, header);
                assert_eq!((decoded.encoding, decoded.source), (EUC_KR, EncodingSource::Meta), "{meta}");
                assert!(decoded.text.contains("똠방각하"));
            }
        }
    }

    #[test]
    fn meta_declarations_browsers_ignore() {
        // content= without http-equiv, a declaration past 1024 bytes, one inside a comment.
        let late = format!("<p>{}</p><meta charset=euc-kr>", "x".repeat(PRESCAN_BYTES));
        for head in ["<meta content='text/html; charset=euc-kr'>", &late, "<!-- <meta charset=euc-kr> -->"] {
            assert_eq!(prescan(head.as_bytes()), None, "{head}");
        }
        // A UTF-16 declaration read as ASCII means UTF-8; x-user-defined means windows-1252.
        assert_eq!(prescan(b"<meta charset=utf-16le>"), Some(UTF_8));
        assert_eq!(prescan(b"<meta charset=x-user-defined>"), Some(WINDOWS_1252));
        // The first charset attribute counts.
        assert_eq!(prescan(b"<meta charset=euc-kr charset=utf-8>"), Some(EUC_KR));
        assert_eq!(prescan(b"<meta charset=euc-kr"), None, "a tag cut off by the end is no declaration");
    }

    #[test]
    fn undeclared_euc_kr_is_detected() {
        let body = korean_page("");
        let decoded = decode_body(&body, None);
        assert_eq!((decoded.encoding, decoded.source), (EUC_KR, EncodingSource::Detected));
        assert!(decoded.text.contains("똠방각하"));
    }

    #[test]
    fn detection_reads_a_bounded_prefix_of_a_long_page() {
        let long = format!("<script>{}</script>{}", "var a = 1;\n".repeat(5000), KOREAN.repeat(100));
        let body = euc_kr(&long);
        assert!(body.iter().filter(|b| !b.is_ascii()).count() > 2 * DETECT_NON_ASCII);
        let decoded = decode_body(&body, None);
        assert_eq!((decoded.encoding, decoded.source), (EUC_KR, EncodingSource::Detected));
        assert!(decoded.text.ends_with("유지합니다."));
    }

    #[test]
    fn bom_beats_header_and_meta() {
        let mut body = b"\xEF\xBB\xBF<meta charset=euc-kr>h\xC3\xA9llo".to_vec();
        let decoded = decode_body(&body, Some("text/html; charset=windows-1252"));
        assert_eq!((decoded.encoding, decoded.source), (UTF_8, EncodingSource::Bom));
        assert_eq!(decoded.text, "<meta charset=euc-kr>héllo");
        body = vec![0xFF, 0xFE, b'h', 0, 0xE9, 0];
        let decoded = decode_body(&body, Some("text/html; charset=utf-8"));
        assert_eq!((decoded.encoding, &*decoded.text), (UTF_16LE, "hé"));
    }

    #[test]
    fn utf8_by_default_and_malformed_bytes_become_replacement_characters() {
        let decoded = decode_body("<p>héllo 한국어</p>".as_bytes(), None);
        assert_eq!((decoded.encoding, decoded.source), (UTF_8, EncodingSource::Utf8));
        assert!(matches!(decoded.text, Cow::Borrowed(_)));
        let decoded = decode_body(b"a\xFFb", Some("text/html; charset=utf-8"));
        assert_eq!(decoded.text, "a\u{FFFD}b");
        assert_eq!(decode_body(b"", None).text, "");
    }

    #[test]
    fn hidden_content_comments_doctype_and_attributes_are_dropped() {
        let html = "<!DOCTYPE html><html><head><title>The title</title>\
            <style>p { content: \"styled\" }</style>\
            <script>var s = \"<p>scripted</p>\"; if (a < b && c) {} <!-- </p> --></script></head>\
            <body><!-- a comment --><noscript><p>noscript</p></noscript>\
            <template><p>templated <b>bold</b></p><template>nested</template> still</template>\
            <iframe>fallback</iframe><p class=\"attr\" title=\"attribute\">Visible <a href=\"/x\">link</a></p>\
            <script src=x></script></body></html>";
        assert_eq!(visible_text(html), "The title Visible link");
    }

    /// `n` attributes of every form: bare, unquoted, quoted with `>` and spaces in the
    /// value, spaced around `=`, non-ASCII, and `=` as a name's first character.
    fn attributes(n: usize) -> String {
        let forms = ["b{i}", "u{i}=x", "q{i}=\"a > b\"", "s{i} = 'c d'", "é{i}=ü", "={i}"];
        let attributes: Vec<String> =
            (0..n).map(|i| forms[i % forms.len()].replace("{i}", &i.to_string())).collect();
        attributes.join(" ")
    }

    #[test]
    fn tags_of_many_attributes_cost_linear_time() {
        // Tens of thousands of attributes made html5ever's tokenizer quadratic (it compares
        // each attribute with the tag's earlier ones); the scanner only skips them.
        for (rest, text) in [(">text</a><p>after é</p>", "before text after é"), ("", "before")] {
            let page = format!("<p>before</p><a {}{rest}", attributes(30_000));
            assert_eq!(visible_text(&page), text);
        }
        let end_tag = format!("x</a {}>y", attributes(1000));
        assert_eq!(visible_text(&end_tag), "xy");
        let ordinary = format!(
            "<p {} data-x='1>2'>kept</p><!-- <b c=d> --><script>if (a<b) {{}}</script></x y=\"z",
            attributes(255)
        );
        assert_eq!(visible_text(&ordinary), "kept");
    }

    #[test]
    fn character_references_are_decoded() {
        let html = "<p>Tom &amp; Jerry &lt;3 caf&eacute; &#44032;&#xAC00;&#xac00; &copy 2005 a&nbsp;b&nbsp;&nbsp;c</p>\
            <title>&quot;T&quot;</title>";
        assert_eq!(visible_text(html), "Tom & Jerry <3 café 가가가 © 2005 a b c \"T\"");
    }

    #[test]
    fn blocks_separate_words_and_inline_elements_do_not() {
        let cases = [
            ("<p>a</p><p>b</p>", "a b"),
            ("<b>x</b>y", "xy"),
            ("x<span>y</span>z<i>w</i>", "xyzw"),
            ("a<br>b<br/>c", "a b c"),
            ("<ul><li>one<li>two</ul>", "one two"),
            ("<table><tr><td>1</td><td>2</td></tr><tr><th>3</th></tr></table>", "1 2 3"),
            ("<div>a</div><div>b</div><h1>c</h1><h2>d</h2>", "a b c d"),
            ("<title>t</title>body", "t body"),
            ("a<!-- c -->b", "ab"),
            ("  a \n\t b  ", "a b"),
        ];
        for (html, text) in cases {
            assert_eq!(visible_text(html), text, "{html}");
        }
    }

    fn words_of(text: &str) -> Vec<&str> {
        words(text).collect()
    }

    #[test]
    fn words_follow_uax29() {
        assert_eq!(words_of("한국어 웹 문서"), ["한국어", "웹", "문서"]);
        assert_eq!(
            words_of("Don't stop: 3.14, e.g. a_b in 2005 (1,000,000) http://x.org/p?q=1;2 __ _x"),
            [
                "Don't",
                "stop",
                "3.14",
                "e.g",
                "a_b",
                "in",
                "2005",
                "1,000,000",
                "http",
                "x.org",
                "p",
                "q",
                "1;2",
                "_x"
            ]
        );
        assert_eq!(words_of("café’s 웹2.0 naïve"), ["café’s", "웹2.0", "naïve"]);
        assert_eq!(words_of(""), Vec::<&str>::new());
    }

    #[test]
    fn case_folding() {
        let none = word_hashes("Hello HELLO hello", CaseFold::None);
        assert_eq!(none.len(), 3);
        assert!(none[0] != none[1] && none[1] != none[2]);
        let lower = word_hashes("Hello HELLO hello ÉCOLE école ΟΔΟΣ οδος", CaseFold::Lower);
        assert_eq!(lower[..3], [xxh3_64(b"hello"); 3]);
        assert_eq!(lower[3], lower[4]);
        assert_eq!(lower[5], lower[6], "final sigma folds as str::to_lowercase does");
        assert_eq!(word_hashes("Word", CaseFold::None), [xxh3_64(b"Word")]);
    }

    #[test]
    fn case_fold_names() {
        assert_eq!(CaseFold::default(), CaseFold::None);
        assert_eq!(serde_json::to_string(&CaseFold::Lower).ok().as_deref(), Some("\"lower\""));
        assert_eq!(<CaseFold as clap::ValueEnum>::from_str("none", false), Ok(CaseFold::None));
    }

    #[test]
    fn text_hash_ignores_markup_but_not_text() {
        let page = |html: &str| page_words(html.as_bytes(), Some("text/html"), CaseFold::None);
        let a = page("<html><body><p>Hello <b>big</b> world</p><p>Again</p></body></html>");
        let b = page("<!doctype html><div class=x>Hello <i>big</i>  world<!-- new --></div>\n<div>Again</div><script>1</script>");
        let c = page("<p>Hello <b>small</b> world</p><p>Again</p>");
        assert_eq!(a.text_hash, b.text_hash);
        assert_eq!(a.words, b.words);
        assert_ne!(a.text_hash, c.text_hash);
        assert_eq!(a.encoding, "UTF-8");
        let korean = page_words(&korean_page(""), None, CaseFold::Lower);
        assert_eq!(korean.encoding, "EUC-KR");
        assert_eq!(korean.words[..2], [xxh3_64("한국어".as_bytes()), xxh3_64("한국어".as_bytes())]);
    }

    /// ASCII word machinery, Hangul, and characters whose UAX #29 classes could interact with
    /// neighbouring ASCII: accented letters, combining marks (U+093E is also alphabetic, so it
    /// makes a word of the spaces it attaches to), soft hyphen, typographic apostrophe,
    /// ideographic and no-break spaces, ZWJ, emoji, Katakana, Hebrew, flags.
    fn text_char() -> impl Strategy<Value = char> {
        prop_oneof![
            4 => prop::sample::select(b"aZ09_.':,;\" \r\n\t-/(".map(char::from).to_vec()),
            2 => prop::sample::select(vec!['한', '국', '어', '웹']),
            2 => prop::sample::select(vec![
                'é', '\u{301}', '\u{93E}', '\u{AD}', '’', '\u{3000}', '\u{A0}', '\u{200D}', '😀', 'カ', 'א', '🇰', '٣', '·', 'Σ',
            ]),
        ]
    }

    proptest! {
        #[test]
        fn words_equal_unicode_words(chars in prop::collection::vec(text_char(), 0..60)) {
            let text: String = chars.into_iter().collect();
            let expected: Vec<&str> = text.unicode_words().collect();
            prop_assert_eq!(words_of(&text), expected);
        }

        #[test]
        fn folding_equals_to_lowercase(chars in prop::collection::vec(text_char(), 0..20)) {
            let word: String = chars.into_iter().collect();
            let mut scratch = String::new();
            prop_assert_eq!(lowercase(&word, &mut scratch), word.to_lowercase());
        }
    }
}
