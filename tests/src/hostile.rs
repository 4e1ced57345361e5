//! A web server on 127.0.0.1 that misbehaves in each way a site on the web can: bodies
//! that never end, exceed the limit, trickle, or inflate; 100 KB of headers; a redirect
//! loop; bytes that are not the encoding they claim; a connection closed mid-response; and
//! robots.txt files of 10 MB or with absurd Crawl-delays; sitemaps that declare entities
//! (a billion laughs, an external entity), inflate to 1 GB, name themselves, or name other
//! hosts' pages. HTTP/1.1 is written by hand so that the server can break the protocol as
//! such sites do.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// One misbehaviour: a page on a host of its own, so that each has its own robots.txt.
#[derive(Debug, Clone, Copy)]
pub struct Hostility {
    pub name: &'static str,
    pub host: &'static str,
    path: &'static str,
}

/// Every misbehaviour the server knows.
pub const HOSTILITIES: [Hostility; 19] = [
    Hostility { name: "an endless body", host: "endless.hostile.test", path: "/page.html" },
    Hostility { name: "a body over the limit", host: "huge.hostile.test", path: "/page.html" },
    Hostility { name: "1 byte per second", host: "slow.hostile.test", path: "/page.html" },
    Hostility { name: "a gzip bomb", host: "bomb.hostile.test", path: "/page.html" },
    Hostility { name: "100 KB of headers", host: "headers.hostile.test", path: "/page.html" },
    Hostility { name: "a redirect loop", host: "loop.hostile.test", path: "/page.html" },
    Hostility { name: "invalid UTF-8", host: "invalid-utf8.hostile.test", path: "/page.html" },
    Hostility { name: "mixed encodings", host: "mixed.hostile.test", path: "/page.html" },
    Hostility { name: "closed mid-response", host: "closes.hostile.test", path: "/page.html" },
    Hostility { name: "Crawl-delay: 0", host: "delay-zero.hostile.test", path: "/page.html" },
    Hostility { name: "Crawl-delay: -1", host: "delay-negative.hostile.test", path: "/page.html" },
    Hostility { name: "Crawl-delay: NaN", host: "delay-nan.hostile.test", path: "/page.html" },
    Hostility { name: "Crawl-delay: 10^19", host: "delay-huge.hostile.test", path: "/page.html" },
    Hostility { name: "a 10 MB robots.txt", host: "robots-10mb.hostile.test", path: "/page.html" },
    Hostility { name: "a billion-laughs sitemap", host: "laughs.hostile.test", path: "/sitemap.xml" },
    Hostility { name: "an external-entity sitemap", host: "xxe.hostile.test", path: "/sitemap.xml" },
    Hostility { name: "a 1 GB gzip sitemap", host: "sitemap-bomb.hostile.test", path: "/sitemap.xml.gz" },
    Hostility {
        name: "a sitemap index naming itself",
        host: "self-index.hostile.test",
        path: "/sitemap.xml",
    },
    Hostility {
        name: "a sitemap of other hosts' pages",
        host: "elsewhere.hostile.test",
        path: "/sitemap.xml",
    },
];

/// What the gzip sitemap inflates to: the same entry over and over, 25 million times.
const SITEMAP_BOMB_INFLATED_BYTES: usize = 1 << 30;

/// The 1 GB gzip sitemap, about a megabyte on the wire, made once: a megabyte of entries
/// is deflated twice (the second time with the first as its window) and the second
/// block repeated, as deflating the whole would take a minute in a debug build.
fn sitemap_bomb() -> &'static [u8] {
    static BOMB: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BOMB.get_or_init(|| {
        let head = b"<?xml version=\"1.0\"?><urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">";
        let entry = "<url><loc>http://sitemap-bomb.hostile.test/a.html</loc></url>";
        let chunk = entry.repeat((1 << 20) / entry.len()).into_bytes();
        gzip_repeated(head, &chunk, SITEMAP_BOMB_INFLATED_BYTES / chunk.len(), b"</urlset>")
    })
}

/// A gzip member of `head`, `times` × `chunk` (at least the 32 KiB window long) and
/// `tail`, compressing `chunk` only twice.
fn gzip_repeated(head: &[u8], chunk: &[u8], times: usize, tail: &[u8]) -> Vec<u8> {
    use flate2::{Compress, Compression, Crc, FlushCompress};
    let mut compress = Compress::new(Compression::best(), false);
    let mut deflate = |mut input: &[u8], flush: FlushCompress| {
        let mut out = Vec::new();
        loop {
            out.reserve(64 << 10);
            let before = compress.total_in();
            let status = compress.compress_vec(input, &mut out, flush).expect("in memory");
            input = &input[usize::try_from(compress.total_in() - before).expect("fits")..];
            // Done once the input is in and the compressor left room unused.
            if status == flate2::Status::StreamEnd || (input.is_empty() && out.len() < out.capacity()) {
                return out;
            }
        }
    };
    let mut gzip = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    gzip.extend(deflate(head, FlushCompress::None));
    gzip.extend(deflate(chunk, FlushCompress::Sync));
    let repeated = deflate(chunk, FlushCompress::Sync);
    for _ in 1..times {
        gzip.extend_from_slice(&repeated);
    }
    gzip.extend(deflate(tail, FlushCompress::Finish));
    let crc_of = |bytes: &[u8]| {
        let mut crc = Crc::new();
        crc.update(bytes);
        crc
    };
    let (mut crc, chunk_crc) = (crc_of(head), crc_of(chunk));
    for _ in 0..times {
        crc.combine(&chunk_crc);
    }
    crc.combine(&crc_of(tail));
    gzip.extend_from_slice(&crc.sum().to_le_bytes());
    gzip.extend_from_slice(&crc.amount().to_le_bytes());
    gzip
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    #[test]
    fn a_repeated_gzip_inflates_to_what_it_repeats() {
        let chunk: Vec<u8> = (0..40_000u32).map(|n| (n % 251) as u8).collect();
        let gzip = super::gzip_repeated(b"<head>", &chunk, 5, b"<tail>");
        let mut inflated = Vec::new();
        flate2::read::GzDecoder::new(gzip.as_slice()).read_to_end(&mut inflated).expect("valid gzip");
        let mut expected = b"<head>".to_vec();
        (0..5).for_each(|_| expected.extend_from_slice(&chunk));
        expected.extend_from_slice(b"<tail>");
        assert!(inflated == expected, "{} bytes inflated, {} expected", inflated.len(), expected.len());
    }

    #[test]
    fn the_sitemap_bomb_is_a_megabyte_on_the_wire_and_a_gigabyte_inflated() {
        let bomb = super::sitemap_bomb();
        assert!(bomb.len() < 8 << 20, "{} bytes on the wire", bomb.len());
        // The trailer's size (the repeated gzip's validity is tested above).
        let size = u32::from_le_bytes(bomb[bomb.len() - 4..].try_into().expect("four bytes"));
        assert!(u64::from(size) >= super::SITEMAP_BOMB_INFLATED_BYTES as u64 - (1 << 20), "{size}");
        let mut start = String::new();
        flate2::read::GzDecoder::new(bomb).take(200).read_to_string(&mut start).expect("valid");
        assert!(start.starts_with("<?xml") && start.contains("<url><loc>"), "{start}");
    }
}

/// A sitemap declaring nested entities that would expand to 10^9 copies of "lol".
const BILLION_LAUGHS: &str = r#"<?xml version="1.0"?>
<!DOCTYPE urlset [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>http://laughs.hostile.test/&lol9;</loc></url></urlset>
"#;

/// A sitemap whose entry would be the server's password file, were entities expanded.
const EXTERNAL_ENTITY: &str = r#"<?xml version="1.0"?>
<!DOCTYPE urlset [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>http://xxe.hostile.test/&secret;</loc></url></urlset>
"#;

/// Bytes inflated from the gzip bomb: far over any body limit, from 64 KB on the wire.
const BOMB_INFLATED_BYTES: usize = 64 << 20;
const ROBOTS_BYTES: usize = 10 << 20;
/// What a well-behaved answer carries, so that the misbehaviours are the only difference.
const PAGE: &[u8] = b"<html><body><p>hostile</p></body></html>";

#[derive(Debug)]
pub struct HostileWeb {
    address: SocketAddr,
    task: JoinHandle<()>,
}

impl HostileWeb {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("hostile web listens");
        let address = listener.local_addr().expect("address");
        let bomb: &'static [u8] = Box::leak(gzip_of_zeros(BOMB_INFLATED_BYTES).into_boxed_slice());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    // A client that goes away mid-answer is what most of these provoke.
                    let _ = serve(stream, bomb).await;
                });
            }
        });
        Self { address, task }
    }

    pub fn url(&self, hostility: &Hostility) -> String {
        format!("http://{}:{}{}", hostility.host, self.address.port(), hostility.path)
    }
}

impl Drop for HostileWeb {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn gzip_of_zeros(len: usize) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0_u8; 1 << 20];
    for _ in 0..len / zeros.len() {
        encoder.write_all(&zeros).expect("in memory");
    }
    encoder.finish().expect("in memory")
}

/// Reads one request's head (up to 16 KiB) and answers it as its host misbehaves.
async fn serve(mut stream: TcpStream, bomb: &[u8]) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buffer = [0_u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 << 10 {
        let read = stream.read(&mut buffer).await?;
        if read == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buffer[..read]);
    }
    let head = String::from_utf8_lossy(&head);
    let path = head.split_whitespace().nth(1).unwrap_or("/");
    let authority = head
        .lines()
        .find_map(|line| line.split_once(':').filter(|(name, _)| name.eq_ignore_ascii_case("host")))
        .map(|(_, value)| value.trim().to_owned())
        .unwrap_or_default();
    let host = authority.split(':').next().unwrap_or_default().to_owned();

    if path == "/robots.txt" {
        let delay = match host.split('.').next().unwrap_or_default() {
            "delay-zero" => "0",
            "delay-negative" => "-1",
            "delay-nan" => "NaN",
            "delay-huge" => "10000000000000000000",
            "robots-10mb" => return ten_megabyte_robots(&mut stream).await,
            _ => return answer(&mut stream, "404 Not Found", "text/plain", &[], b"").await,
        };
        let robots = format!("User-agent: *\nCrawl-delay: {delay}\nAllow: /\n");
        return answer(&mut stream, "200 OK", "text/plain", &[], robots.as_bytes()).await;
    }
    match host.split('.').next().unwrap_or_default() {
        "endless" => {
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n")
                .await?;
            loop {
                stream.write_all(&[b'x'; 64 << 10]).await?;
            }
        }
        "huge" => {
            let announced = 64 << 20;
            let head =
                format!("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {announced}\r\n\r\n");
            stream.write_all(head.as_bytes()).await?;
            for _ in 0..announced / (64 << 10) {
                stream.write_all(&[b'y'; 64 << 10]).await?;
            }
            Ok(())
        }
        "slow" => {
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1000\r\n\r\n")
                .await?;
            for byte in PAGE.iter().cycle().take(1000) {
                stream.write_all(&[*byte]).await?;
                // The trickle is the misbehaviour, not a wait for anything.
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Ok(())
        }
        "bomb" => {
            answer(&mut stream, "200 OK", "text/html", &[("Content-Encoding", "gzip".to_owned())], bomb).await
        }
        "headers" => {
            let filler: Vec<(&str, String)> = (0..100).map(|_| ("X-Filler", "f".repeat(1000))).collect();
            answer(&mut stream, "200 OK", "text/html", &filler, PAGE).await
        }
        "loop" => answer(&mut stream, "302 Found", "text/html", &[("Location", path.to_owned())], b"").await,
        "invalid-utf8" => {
            answer(
                &mut stream,
                "200 OK",
                "text/html; charset=utf-8",
                &[],
                b"<p>\xff\xfe broken \xc3\x28 \xed\xa0\x80</p>",
            )
            .await
        }
        "mixed" => {
            // Declared UTF-8 by the header and EUC-KR by the page, holding Latin-1 and
            // EUC-KR bytes and a UTF-8 sequence.
            let body = b"<meta charset=\"euc-kr\"><p>caf\xe9 \xc7\xd1\xb1\xb9 \xe2\x82\xac</p>";
            answer(&mut stream, "200 OK", "text/html; charset=utf-8", &[], body).await
        }
        "laughs" => answer(&mut stream, "200 OK", "application/xml", &[], BILLION_LAUGHS.as_bytes()).await,
        "xxe" => answer(&mut stream, "200 OK", "application/xml", &[], EXTERNAL_ENTITY.as_bytes()).await,
        "sitemap-bomb" => {
            // Made off the async threads: a second or two the first time.
            let bomb = tokio::task::spawn_blocking(sitemap_bomb).await.map_err(std::io::Error::other)?;
            answer(&mut stream, "200 OK", "application/gzip", &[], bomb).await
        }
        "self-index" => {
            let index = format!(
                "<?xml version=\"1.0\"?><sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
                 <sitemap><loc>http://{authority}/sitemap.xml</loc></sitemap></sitemapindex>"
            );
            answer(&mut stream, "200 OK", "application/xml", &[], index.as_bytes()).await
        }
        "elsewhere" => {
            let entries: String = (0..1000)
                .map(|n| format!("<url><loc>http://victim{n}.example/page.html</loc></url>"))
                .collect();
            let sitemap = format!(
                "<?xml version=\"1.0\"?><urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">{entries}</urlset>"
            );
            answer(&mut stream, "200 OK", "application/xml", &[], sitemap.as_bytes()).await
        }
        "closes" => {
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 10000\r\n\r\n")
                .await?;
            stream.write_all(PAGE).await?;
            stream.shutdown().await
        }
        _ => answer(&mut stream, "200 OK", "text/html", &[], PAGE).await,
    }
}

async fn answer(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head =
        format!("HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n", body.len());
    for (name, value) in headers {
        head += &format!("{name}: {value}\r\n");
    }
    head += "Connection: close\r\n\r\n";
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    stream.shutdown().await
}

async fn ten_megabyte_robots(stream: &mut TcpStream) -> std::io::Result<()> {
    let mut robots = b"User-agent: *\nAllow: /\n".to_vec();
    while robots.len() < ROBOTS_BYTES {
        robots.extend_from_slice(b"Disallow: /a-path-that-only-makes-the-file-long/\n");
    }
    answer(stream, "200 OK", "text/plain", &[], &robots).await
}
