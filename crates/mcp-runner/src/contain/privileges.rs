//! Giving up every privilege before a stdio server is `exec`ed: no new privileges, and no
//! capability in any set, bounding set included, so that a server started by root runs as uid 0
//! with no capability.

use caps::{CapSet, Capability};

/// Sets `PR_SET_NO_NEW_PRIVS` and empties every capability set of this (single-threaded)
/// process. The bounding set can only be emptied with `CAP_SETPCAP` (a process started by
/// root); without it nothing is dropped from it, and an `exec` cannot grant capabilities
/// anyway (no new privileges: file capabilities and set-user-ID bits are ignored).
///
/// Fails, and the server must not start, when any step fails or a capability is left in the
/// bounding set (one the kernel knows and this build does not).
pub(super) fn drop_all() -> Result<(), String> {
    nix::sys::prctl::set_no_new_privs()
        .map_err(|error| format!("cannot set no_new_privs: {error}"))?;
    let may_drop_bounding = caps::has_cap(None, CapSet::Effective, Capability::CAP_SETPCAP)
        .map_err(|error| format!("cannot read the effective capabilities: {error}"))?;
    if may_drop_bounding {
        // Capabilities this kernel does not know are left out (PR_CAPBSET_DROP would fail
        // with EINVAL); any it knows beyond this list is caught by the check below.
        for cap in caps::runtime::thread_all_supported() {
            caps::drop(None, CapSet::Bounding, cap)
                .map_err(|error| format!("cannot drop {cap} from the bounding set: {error}"))?;
        }
    }
    // Kernels before 4.3 have no ambient set, so nothing to clear there.
    if caps::runtime::ambient_set_supported().is_ok() {
        caps::clear(None, CapSet::Ambient)
            .map_err(|error| format!("cannot clear the ambient capabilities: {error}"))?;
    }
    for set in [CapSet::Inheritable, CapSet::Effective, CapSet::Permitted] {
        caps::clear(None, set)
            .map_err(|error| format!("cannot clear the {set:?} capabilities: {error}"))?;
    }
    if may_drop_bounding {
        let left = status_mask("CapBnd")?;
        if left != 0 {
            return Err(format!(
                "the bounding set keeps capabilities {left:#x} that this build cannot drop; \
                 refusing to start an MCP server with them"
            ));
        }
    }
    Ok(())
}

/// The capability mask `field` (`CapEff`, `CapBnd`, …) of this process, from
/// `/proc/self/status`.
fn status_mask(field: &str) -> Result<u64, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|error| format!("cannot read /proc/self/status: {error}"))?;
    parse_mask(&status, field).ok_or_else(|| format!("/proc/self/status has no readable {field}"))
}

/// The hexadecimal mask of line `field:` in a `/proc/<pid>/status` text.
fn parse_mask(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| u64::from_str_radix(value.trim(), 16).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_are_read_from_status_lines() {
        let status = "Name:\tsh\nCapInh:\t0000000000000000\nCapEff:\t000001fffeffffff\n\
                      CapBnd:\t0000000000000000\n";
        assert_eq!(parse_mask(status, "CapEff"), Some(0x1ff_feff_ffff));
        assert_eq!(parse_mask(status, "CapBnd"), Some(0));
        assert_eq!(parse_mask(status, "CapAmb"), None);
        assert_eq!(parse_mask("CapEff:\tnot-hex\n", "CapEff"), None);
    }
}
