//! The git commit for `recrawl_build_info`: `RECRAWL_GIT_COMMIT` when set (an image build
//! without `.git`), else `git rev-parse HEAD`, else "unknown" (no git, or not a clone).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok().filter(|o| o.status.success())?;
    let text = String::from_utf8(output.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=RECRAWL_GIT_COMMIT");
    let commit = match std::env::var("RECRAWL_GIT_COMMIT").ok().filter(|c| !c.is_empty()) {
        Some(commit) => commit,
        None => match git(&["rev-parse", "--short=12", "HEAD"]) {
            Some(commit) => {
                // Rebuild when HEAD moves: HEAD itself names the branch, the branch's ref
                // (loose or packed) names the commit.
                let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
                watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
                for name in watched {
                    // A path that does not exist would rerun this script on every build.
                    let path = git(&["rev-parse", "--path-format=absolute", "--git-path", &name]);
                    if let Some(path) = path.filter(|p| std::path::Path::new(p).exists()) {
                        println!("cargo:rerun-if-changed={path}");
                    }
                }
                commit
            }
            None => "unknown".to_owned(),
        },
    };
    println!("cargo:rustc-env=RECRAWL_GIT_COMMIT={commit}");
}
