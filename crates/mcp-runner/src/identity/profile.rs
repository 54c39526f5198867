//! Profile names: which local device identity a command or runner uses.
//!
//! A name is 1–64 characters from `[A-Za-z0-9._-]`, so it is always one safe path component
//! and one readable keyring account part.

use super::error::IdentityError;

/// The profile used when none is named.
pub const DEFAULT_PROFILE: &str = "default";
/// Environment variable selecting the device profile.
pub const PROFILE_VAR: &str = "SWITCHYARD_DEVICE_PROFILE";

const MAX_LEN: usize = 64;

/// Checks that `name` is a valid profile name.
pub fn validate_profile(name: &str) -> Result<(), IdentityError> {
    let valid = (1..=MAX_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if valid {
        Ok(())
    } else {
        Err(IdentityError::InvalidProfile {
            name: name.to_owned(),
        })
    }
}

/// The profile to use: `explicit` when given, else `SWITCHYARD_DEVICE_PROFILE` when set and not
/// empty, else [`DEFAULT_PROFILE`]; validated.
pub fn select_profile(explicit: Option<&str>) -> Result<String, IdentityError> {
    let from_env = std::env::var(PROFILE_VAR).ok().filter(|p| !p.is_empty());
    let name = explicit
        .map(str::to_owned)
        .or(from_env)
        .unwrap_or_else(|| DEFAULT_PROFILE.to_owned());
    validate_profile(&name)?;
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_rule() {
        for good in ["default", "a", "work-laptop_2.old", &"x".repeat(64)] {
            assert!(validate_profile(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "a/b",
            "../x",
            "with space",
            "é",
            "tab\t",
            &"x".repeat(65),
        ] {
            let err = validate_profile(bad).expect_err(bad);
            assert!(
                err.to_string().contains("not a valid device profile name"),
                "{err}"
            );
        }
    }

    #[test]
    fn an_explicit_name_wins() {
        assert_eq!(select_profile(Some("laptop")).expect("valid"), "laptop");
        assert!(select_profile(Some("no/slash")).is_err());
    }
}
