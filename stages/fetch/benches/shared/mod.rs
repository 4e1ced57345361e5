//! What more than one of the fetch stage's benches reads.

/// A 10 KB HTML page with 20 links, the size of most pages.
pub fn small_page() -> String {
    let mut html = String::from("<html><head><title>bench page</title></head><body>");
    for i in 0..20 {
        html.push_str(&format!("<p><a href=\"/section/page{i}.html\">link {i}</a> "));
        html.push_str(&"lorem ipsum dolor sit amet ".repeat(17));
        html.push_str("</p>\n");
    }
    html.push_str("</body></html>");
    html
}
