//! A real browser for the web UI tests: Debian's headless Chromium driven through chromedriver
//! with the W3C WebDriver protocol, over the reqwest client the other tests use. The protocol
//! subset needed here is small (navigate, find, click, type, run a script, screenshot, read the
//! browser log), so it is spoken directly rather than through a WebDriver crate.
//!
//! Every page's console is checked: [`Browser::assert_no_console_errors`] fails the test on any
//! `console.error`, uncaught exception or failed resource load. Screenshots go to
//! `target/screenshots/` for reviewers.

use crate::harness::{ChildGuard, scratch_dir};
use base64::Engine;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use switchyard_testkit::scratch::Scratch;

/// The key under which WebDriver returns an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// How long to wait for a page condition unless a test says otherwise.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A program on PATH, or a failure saying how to install it: browser tests never skip.
#[track_caller]
fn required_program(name: &str, package: &str) -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!("`{name}` is not installed: the web UI tests need Debian's headless browser (`apt-get install -y chromium chromium-driver`; .ci/run installs {package})")
        })
}

/// How many times chromedriver is started before its port collisions fail the test.
const DRIVER_STARTS: usize = 5;

/// What chromedriver's stdout said before it settled.
enum DriverStart {
    /// It listens on this port.
    Listening(String),
    /// It exited: everything it printed.
    Exited(Vec<String>),
}

/// Starts chromedriver on a port of its choosing, in its own process group; returns it and
/// its port. chromedriver binds the port it got for IPv4 on IPv6 too, and exits when another
/// process holds that one ("IPv6 port not available"), which parallel tests make likely: such
/// a start is repeated with a new port. Any other exit fails the test with what it printed.
async fn start_driver(chromedriver: &std::path::Path) -> (ChildGuard, String) {
    let mut said = Vec::new();
    for _ in 0..DRIVER_STARTS {
        let mut command = Command::new(chromedriver);
        command
            .arg("--port=0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command.spawn().expect("chromedriver starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let driver = ChildGuard(child);
        // Read the announced port, then keep draining stdout so chromedriver never writes to a
        // closed pipe.
        let (start_tx, start_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(port) = line.split("started successfully on port ").nth(1) {
                    let _ = start_tx.send(DriverStart::Listening(
                        port.trim_end_matches('.').to_owned(),
                    ));
                }
                lines.push(line);
            }
            let _ = start_tx.send(DriverStart::Exited(lines));
        });
        let start = tokio::task::spawn_blocking(move || start_rx.recv_timeout(PATIENCE))
            .await
            .expect("waiting for chromedriver")
            .expect("chromedriver announces its port");
        match start {
            DriverStart::Listening(port) => return (driver, port),
            DriverStart::Exited(lines)
                if lines.iter().any(|line| line.contains("port not available")) =>
            {
                said = lines;
            }
            DriverStart::Exited(lines) => {
                panic!("chromedriver exited at start:\n{}", lines.join("\n"))
            }
        }
    }
    panic!(
        "chromedriver found no free port in {DRIVER_STARTS} starts:\n{}",
        said.join("\n")
    )
}

/// A headless Chromium session.
pub struct Browser {
    http: reqwest::Client,
    /// `http://127.0.0.1:PORT/session/ID`.
    session: String,
    /// chromedriver, in its own process group with the browser it starts.
    driver: ChildGuard,
    _profile: Scratch,
}

/// A reference to an element of the current page.
#[derive(Clone, Debug)]
pub struct Element(String);

impl Browser {
    /// Starts chromedriver and a fresh headless Chromium with an empty profile.
    pub async fn start() -> Browser {
        let chromium = required_program("chromium", "chromium");
        let chromedriver = required_program("chromedriver", "chromium-driver");
        let profile = scratch_dir("chromium-profile");
        let (driver, port) = start_driver(&chromedriver).await;
        let http = reqwest::Client::new();
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1440,1000", "--lang=en-US",
                    format!("--user-data-dir={}", profile.dir().display()),
                ],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let base = format!("http://127.0.0.1:{port}");
        let answer: Value = http
            .post(format!("{base}/session"))
            .json(&capabilities)
            .send()
            .await
            .expect("new session")
            .json()
            .await
            .expect("JSON");
        let id = answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("chromium did not start: {answer}"))
            .to_owned();
        Browser {
            http,
            session: format!("{base}/session/{id}"),
            driver,
            _profile: profile,
        }
    }

    /// Sends a WebDriver command: its `value`, or the WebDriver error code and message.
    async fn try_command(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, (String, String)> {
        let mut request = self.http.request(method, format!("{}{path}", self.session));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer: Value = request
            .send()
            .await
            .expect("chromedriver answers")
            .json()
            .await
            .expect("JSON from chromedriver");
        match answer["value"]["error"].as_str() {
            Some(error) => Err((error.to_owned(), answer["value"]["message"].to_string())),
            None => Ok(answer["value"].clone()),
        }
    }

    /// Sends a WebDriver command and returns its `value`; a WebDriver error fails the test.
    async fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        self.try_command(method, path, body)
            .await
            .unwrap_or_else(|(error, message)| panic!("WebDriver {path}: {error}: {message}"))
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        self.command(reqwest::Method::POST, path, Some(body)).await
    }

    async fn get(&self, path: &str) -> Value {
        self.command(reqwest::Method::GET, path, None).await
    }

    /// Opens a URL and waits for the page to load.
    pub async fn goto(&self, url: &str) {
        self.post("/url", json!({"url": url})).await;
    }

    /// The current URL.
    pub async fn url(&self) -> String {
        self.get("/url")
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Runs a script in the page and returns its value.
    pub async fn execute(&self, script: &str, args: Vec<Value>) -> Value {
        self.post("/execute/sync", json!({"script": script, "args": args}))
            .await
    }

    /// The elements matching a CSS selector now.
    pub async fn find_all(&self, css: &str) -> Vec<Element> {
        let found = self
            .post("/elements", json!({"using": "css selector", "value": css}))
            .await;
        found
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|e| e[ELEMENT].as_str().map(|id| Element(id.to_owned())))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Waits until an element matches `css` and returns the first.
    pub async fn find(&self, css: &str) -> Element {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(element) = self.find_all(css).await.into_iter().next() {
                return element;
            }
            assert!(
                Instant::now() < deadline,
                "no element matches `{css}` on {} after {PATIENCE:?}",
                self.url().await
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Clicks the first element matching `css`, finding it again if a live region replaced it
    /// in between.
    pub async fn click(&self, css: &str) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let element = self.find(css).await;
            match self
                .try_command(
                    reqwest::Method::POST,
                    &format!("/element/{}/click", element.0),
                    Some(json!({})),
                )
                .await
            {
                Ok(_) => return,
                Err((error, _))
                    if error == "stale element reference" && Instant::now() < deadline =>
                {
                    continue;
                }
                Err((error, message)) => panic!("clicking `{css}`: {error}: {message}"),
            }
        }
    }

    /// Replaces the text of the input matching `css`.
    pub async fn fill(&self, css: &str, text: &str) {
        let element = self.find(css).await;
        self.post(&format!("/element/{}/clear", element.0), json!({}))
            .await;
        self.post(
            &format!("/element/{}/value", element.0),
            json!({"text": text}),
        )
        .await;
    }

    /// Chooses the option with this value in the select matching `css`.
    pub async fn select(&self, css: &str, value: &str) {
        self.click(&format!("{css} option[value=\"{value}\"]"))
            .await;
    }

    /// The visible text of the first element matching `css`, read in one step in the page (a
    /// live region may replace the element between two WebDriver commands).
    pub async fn text(&self, css: &str) -> String {
        self.find(css).await;
        let script =
            "const e = document.querySelector(arguments[0]); return e ? e.innerText : null;";
        let text = self
            .execute(script, vec![Value::String(css.to_owned())])
            .await;
        text.as_str()
            .unwrap_or_else(|| panic!("`{css}` disappeared"))
            .trim()
            .to_owned()
    }

    /// Waits until a script returns `true`; `what` says what was awaited when it never does.
    pub async fn wait_until(&self, script: &str, what: &str, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            if self.execute(script, vec![]).await == Value::Bool(true) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: still not true after {within:?} on {}",
                self.url().await
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the text of the first element matching `css` contains `expected`.
    pub async fn wait_for_text(&self, css: &str, expected: &str) {
        let script = format!(
            "const e = document.querySelector({}); return !!e && e.textContent.includes({});",
            Value::String(css.to_owned()),
            Value::String(expected.to_owned())
        );
        self.wait_until(
            &script,
            &format!("`{css}` containing `{expected}`"),
            PATIENCE,
        )
        .await;
    }

    /// Saves a screenshot as `target/screenshots/NAME.png`.
    pub async fn screenshot(&self, name: &str) {
        let encoded = self.get("/screenshot").await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(encoded.as_str().unwrap_or_default())
            .expect("a base64 PNG");
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).expect("screenshot directory");
        std::fs::write(dir.join(format!("{name}.png")), png).expect("screenshot written");
    }

    /// What the pages logged as errors since the last look (`console.error`, uncaught
    /// exceptions, failed resource loads, content security policy violations); reading the log
    /// empties it.
    pub async fn console_errors(&self) -> Vec<String> {
        let entries = self.post("/se/log", json!({"type": "browser"})).await;
        entries
            .as_array()
            .into_iter()
            .flatten()
            .filter(|entry| entry["level"] == "SEVERE")
            .map(|entry| entry["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Fails on any console error since the last look.
    pub async fn assert_no_console_errors(&self) {
        let errors = self.console_errors().await;
        assert!(
            errors.is_empty(),
            "the browser console has errors on {}:\n{}",
            self.url().await,
            errors.join("\n")
        );
    }

    /// Ends the browser session.
    pub async fn quit(self) {
        let _ = self.http.delete(&self.session).send().await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // chromedriver leads its own process group, which holds the browser it started: end
        // them together, even when a test failed before `quit`.
        let pid = i32::try_from(self.driver.0.id()).expect("a process id");
        let group = nix::unistd::Pid::from_raw(pid);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    }
}

/// `target/screenshots`, next to the test binaries' `debug` directory.
fn screenshot_dir() -> PathBuf {
    let target = switchyard_testkit::bins::target_dir().expect("the target directory");
    target.join("screenshots")
}
