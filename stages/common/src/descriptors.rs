//! File descriptors: every stage raises its soft limit to the hard one at start (systemd
//! and many shells start processes at 1024, while the hard limit is far above), and tells
//! an error that was the process running out of them from one a peer caused.

use std::error::Error as StdError;
use std::io;

use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// The descriptor limits before and after [`raise_descriptor_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DescriptorLimits {
    pub soft_before: u64,
    pub soft: u64,
    pub hard: u64,
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and logs both: the stage's own bounds
/// (fetch's idle connections, the HTTP endpoint's cap) then decide what it holds, not a
/// launcher's default. A failure is logged and the limits are left as they were.
pub fn raise_descriptor_limit() -> Option<DescriptorLimits> {
    let (soft_before, hard) = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok(limits) => limits,
        Err(error) => {
            tracing::warn!(%error, "cannot read the file descriptor limit");
            return None;
        }
    };
    let soft = if soft_before < hard {
        match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => hard,
            Err(error) => {
                tracing::warn!(%error, soft = soft_before, hard, "cannot raise the file descriptor limit");
                soft_before
            }
        }
    } else {
        soft_before
    };
    tracing::info!(soft_before, soft, hard, "file descriptor limit (RLIMIT_NOFILE)");
    Some(DescriptorLimits { soft_before, soft, hard })
}

/// Whether `error` or one of its sources is the process (or the system) running out of
/// file descriptors: EMFILE or ENFILE (24 and 23 on Linux and the BSDs). A peer is not to
/// blame for such a failure.
pub fn out_of_descriptors(error: &(dyn StdError + 'static)) -> bool {
    const ENFILE: i32 = 23;
    const EMFILE: i32 = 24;
    let mut current = Some(error);
    while let Some(layer) = current {
        let io = layer.downcast_ref::<io::Error>();
        if io.and_then(io::Error::raw_os_error).is_some_and(|code| code == EMFILE || code == ENFILE) {
            return true;
        }
        // An `io::Error` reports its wrapped error's source as its own, skipping the
        // wrapped error itself.
        current = match io.and_then(io::Error::get_ref) {
            Some(wrapped) => Some(wrapped as &(dyn StdError + 'static)),
            None => layer.source(),
        };
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_out_of_descriptors_is_told_through_the_layers() {
        #[derive(Debug, thiserror::Error)]
        #[error("connect failed")]
        struct Layer(#[source] io::Error);
        assert!(out_of_descriptors(&io::Error::from_raw_os_error(24)));
        assert!(out_of_descriptors(&Layer(io::Error::from_raw_os_error(23))));
        assert!(out_of_descriptors(&io::Error::other(Layer(io::Error::from_raw_os_error(24)))));
        assert!(!out_of_descriptors(&Layer(io::Error::from(io::ErrorKind::ConnectionRefused))));
        assert!(!out_of_descriptors(&io::Error::from_raw_os_error(111)));
    }

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        let limits = raise_descriptor_limit().expect("limits");
        assert_eq!(limits.soft, limits.hard);
        assert!(limits.soft >= limits.soft_before);
        assert_eq!(getrlimit(Resource::RLIMIT_NOFILE).expect("limits"), (limits.hard, limits.hard));
    }
}
