//! What it takes to open one MCP session: the connector spec plus resolved secret values.
//!
//! A [`SessionLaunch`] carries secret values (environment values for a stdio server, header
//! values for an HTTP server), so its `Debug` prints names only. The environment a stdio child
//! sees is built here, from an empty environment: a short allowlist copied from the runner's own
//! environment plus the launch's values. Nothing else of the runner leaks into the child — in
//! particular never `DATABASE_URL` or a `SWITCHYARD_*` variable.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use switchyard_protocol::api::{CallError, ConnectorSpec};
use switchyard_protocol::runner::LeasedCall;

/// Variables copied from the runner's environment into every stdio child, when set: what an
/// ordinary program needs to find executables, its home, its locale and a temp directory.
/// (`HOME` is then replaced by the session's scratch directory: see [`crate::contain`].)
const INHERITED_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR",
];

/// A connector spec with the secret values resolved for one session.
#[derive(Clone)]
pub struct SessionLaunch {
    /// How to reach the MCP server.
    pub spec: ConnectorSpec,
    /// Resolved values for a stdio server's declared environment names.
    pub env: Vec<(String, String)>,
    /// HTTP headers (e.g. `Authorization`) for an HTTP connector.
    pub headers: Vec<(String, String)>,
}

impl fmt::Debug for SessionLaunch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Values are secrets: only their names may be printed.
        let env: Vec<&str> = self.env.iter().map(|(name, _)| name.as_str()).collect();
        let headers: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("SessionLaunch")
            .field("spec", &self.spec)
            .field("env", &env)
            .field("headers", &headers)
            .finish()
    }
}

/// What resolving a launch answers: the launch, or the call's `failed` error (nothing was sent).
pub type LaunchFuture = Pin<Box<dyn Future<Output = Result<SessionLaunch, CallError>> + Send>>;

/// What renewing a launch answers: `None` when its credential cannot be renewed (a static
/// value), else a launch with a renewed credential or the call's `failed` error.
pub type RenewFuture =
    Pin<Box<dyn Future<Output = Option<Result<SessionLaunch, CallError>>> + Send>>;

/// Turns a leased call into a session launch (connector spec plus resolved secrets). An error
/// fails the call before anything is sent. Asynchronous, so that a host can read values from
/// where it keeps them (the server: its database) at every call.
///
/// Any `Fn(&LeasedCall) -> LaunchFuture` is one (nothing to renew; see
/// [`crate::executor::immediate_resolver`] for values resolved at once); a resolver whose
/// credential can be renewed (the server's OAuth tokens) implements [`ResolveLaunch::renew`].
pub trait ResolveLaunch: Send + Sync {
    /// The launch for `call`.
    fn launch(&self, call: &LeasedCall) -> LaunchFuture;

    /// Called once per call when its MCP server refused the credential `refused` sent (HTTP
    /// 401, before it processed anything): a launch with a renewed credential to try once
    /// more, or `None` when nothing can be renewed (the refusal then fails the call).
    fn renew(&self, call: &LeasedCall, refused: &SessionLaunch) -> RenewFuture {
        let _ = (call, refused);
        Box::pin(async { None })
    }

    /// Called when the MCP server refused the renewed credential too: the call fails
    /// (`credential_refused`), and the resolver may record that a person must act.
    fn refused_renewed(&self, call: &LeasedCall) -> NoticeFuture {
        let _ = call;
        Box::pin(async {})
    }
}

/// What [`ResolveLaunch::refused_renewed`] answers once it has recorded the refusal.
pub type NoticeFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

impl<F> ResolveLaunch for F
where
    F: Fn(&LeasedCall) -> LaunchFuture + Send + Sync,
{
    fn launch(&self, call: &LeasedCall) -> LaunchFuture {
        self(call)
    }
}

/// A shared [`ResolveLaunch`], as the executor holds it.
pub type LaunchResolver = Arc<dyn ResolveLaunch>;

/// Variables a launch may never set because the runner decides them: where programs are found,
/// who and where the child runs as, and the runner's database.
const RESERVED_ENV: &[&str] = &["PATH", "HOME", "USER", "SHELL", "DATABASE_URL"];

/// Proxy variables, which reroute a child's network traffic. Programs read them in either case
/// (`http_proxy` as much as `HTTP_PROXY`), so they are reserved in any case.
const ROUTING_ENV: &[&str] = &["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY"];

/// Whether `name` may never be set in a stdio child by a launch: the runner's own configuration,
/// the child's identity and search path, the dynamic loader's switches and network routing.
pub fn is_reserved_env_name(name: &str) -> bool {
    RESERVED_ENV.contains(&name)
        || ROUTING_ENV
            .iter()
            .any(|routing| routing.eq_ignore_ascii_case(name))
        || name.starts_with("SWITCHYARD_")
        || name.starts_with("LD_")
        || name.starts_with("DYLD_")
}

/// The complete environment of a stdio child: the allowlisted subset of `inherited` (the
/// runner's environment) followed by `launch_env`, which wins on a name clash.
///
/// The caller must have refused reserved names in `launch_env` (see [`is_reserved_env_name`]).
pub fn child_environment(
    inherited: impl IntoIterator<Item = (OsString, OsString)>,
    launch_env: &[(String, String)],
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = inherited
        .into_iter()
        .filter(|(name, _)| {
            INHERITED_ENV
                .iter()
                .any(|allowed| OsStr::new(allowed) == name)
        })
        .filter(|(name, _)| !launch_env.iter().any(|(own, _)| OsStr::new(own) == name))
        .collect();
    env.extend(
        launch_env
            .iter()
            .map(|(name, value)| (OsString::from(name), OsString::from(value))),
    );
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os_pairs(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(name, value)| (OsString::from(name), OsString::from(value)))
            .collect()
    }

    #[test]
    fn child_environment_keeps_only_the_allowlist_and_the_launch_values() {
        let runner = os_pairs(&[
            ("PATH", "/usr/bin"),
            ("HOME", "/home/runner"),
            ("DATABASE_URL", "postgres://secret"),
            ("SWITCHYARD_TOKEN", "syt_secret"),
            ("AWS_SECRET_ACCESS_KEY", "aws"),
            ("LANG", "C.UTF-8"),
        ]);
        let launch = vec![("API_KEY".to_owned(), "value-1234".to_owned())];

        let env = child_environment(runner, &launch);

        assert_eq!(
            env,
            os_pairs(&[
                ("PATH", "/usr/bin"),
                ("HOME", "/home/runner"),
                ("LANG", "C.UTF-8"),
                ("API_KEY", "value-1234"),
            ])
        );
    }

    #[test]
    fn a_launch_value_replaces_an_inherited_one() {
        let runner = os_pairs(&[("HOME", "/home/runner")]);
        let launch = vec![("HOME".to_owned(), "/srv/tool".to_owned())];

        assert_eq!(
            child_environment(runner, &launch),
            os_pairs(&[("HOME", "/srv/tool")])
        );
    }

    #[test]
    fn runner_configuration_and_loader_variables_are_reserved() {
        for name in [
            "DATABASE_URL",
            "SWITCHYARD_URL",
            "LD_PRELOAD",
            "DYLD_INSERT_LIBRARIES",
            "PATH",
            "HOME",
            "USER",
            "SHELL",
            "HTTPS_PROXY",
            "http_proxy",
            "No_Proxy",
        ] {
            assert!(is_reserved_env_name(name), "{name} must be reserved");
        }
        for name in ["GITHUB_TOKEN", "API_KEY", "path", "PROXY_TOKEN"] {
            assert!(!is_reserved_env_name(name), "{name} must be allowed");
        }
    }

    #[test]
    fn debug_prints_names_but_never_values() {
        let launch = SessionLaunch {
            spec: ConnectorSpec::Http {
                url: "https://mcp.example/mcp".to_owned(),
            },
            env: vec![("API_KEY".to_owned(), "env-secret-value".to_owned())],
            headers: vec![(
                "Authorization".to_owned(),
                "Bearer header-secret".to_owned(),
            )],
        };

        let printed = format!("{launch:?}");

        assert!(printed.contains("API_KEY") && printed.contains("Authorization"));
        assert!(!printed.contains("env-secret-value"));
        assert!(!printed.contains("header-secret"));
    }
}
