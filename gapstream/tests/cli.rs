//! The `gapstream` binary as a user runs it: signals, error messages, options.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

fn gapstream() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gapstream"))
}

/// Runs `gapstream args`, returns (success, stderr).
fn run(args: &[&str]) -> (bool, String) {
    let (ok, _, err) = run_both(args);
    (ok, err)
}

/// Runs `gapstream args`, returns (success, stdout, stderr).
fn run_both(args: &[&str]) -> (bool, String, String) {
    let out = gapstream().args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Starts `gapstream args` with stdout and stderr piped line by line into one channel.
fn spawn(args: &[&str]) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut child = gapstream()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let out: Box<dyn std::io::Read + Send> = Box::new(child.stdout.take().unwrap());
    let err: Box<dyn std::io::Read + Send> = Box::new(child.stderr.take().unwrap());
    for pipe in [out, err] {
        let tx = tx.clone();
        thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(l) = line else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
    }
    (child, rx)
}

fn sigint(pid: u32) {
    let ok = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -INT {pid}");
}

/// One Ctrl-C (SIGINT) while frames stream: the demo stops at once and cleanly — no "Interrupted
/// system call", no reconnect, the summary printed, exit status 0. At 5 fps the receiver spends
/// most of its time waiting in a socket read, where a signal used to cut the read short (EINTR,
/// taken for a lost connection); two runs.
#[test]
fn one_sigint_stops_the_demo_cleanly() {
    for _ in 0..2 {
        one_sigint_run();
    }
}

fn one_sigint_run() {
    let (mut child, lines) = spawn(&["demo", "--viewer", "none", "--fps", "5"]);
    let mut seen = Vec::new();
    let t0 = Instant::now();
    // Streaming: a status line with frames > 0 (one line per 0.5 s when stdout is not a terminal).
    loop {
        let l = lines
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no status line from the demo: {seen:#?}"));
        let streaming = l
            .split("frames ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n > 0);
        seen.push(l);
        if streaming || t0.elapsed() > Duration::from_secs(60) {
            break;
        }
    }
    // Let a few status intervals pass (reads with a timeout are in flight when the signal lands).
    thread::sleep(Duration::from_millis(700));
    seen.extend(lines.try_iter());
    // What the signal may cause is printed after it: lines before (for example "ports 5000/5100
    // unavailable (... os error 98)" when another program holds them) are not its doing.
    let before = seen.len();
    sigint(child.id());
    let t1 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t1.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("the demo did not stop within 10 s of one SIGINT");
        }
        thread::sleep(Duration::from_millis(20));
    };
    let stopped_in = t1.elapsed();
    seen.extend(lines.try_iter());
    while let Ok(l) = lines.recv_timeout(Duration::from_millis(300)) {
        seen.push(l);
    }
    let all = seen.join("\n");
    assert!(status.success(), "exit status {status:?}:\n{all}");
    assert!(
        stopped_in < Duration::from_secs(3),
        "stopping took {stopped_in:?}"
    );
    let after = seen[before..].join("\n");
    for bad in ["Interrupted", "reconnect", "error"] {
        assert!(!after.contains(bad), "`{bad}` after one SIGINT:\n{all}");
    }
    assert!(all.contains("gapstream: "), "no summary:\n{all}");
}

/// A key file whose secret was changed: one clear line naming the file and the mismatch, not
/// "field `local_public` is not 64 hex digits".
#[test]
fn a_secret_that_does_not_match_its_public_key_is_said_so() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("keys");
    let (ok, err) = run(&["pair", "--dir", dir.to_str().unwrap()]);
    assert!(ok, "{err}");
    let f = dir.join("receiver.key");
    let text = std::fs::read_to_string(&f).unwrap();
    let secret = text
        .lines()
        .find_map(|l| l.strip_prefix("local_secret="))
        .unwrap()
        .to_string();
    let flipped = format!(
        "{}{}",
        if secret.starts_with('0') { "1" } else { "0" },
        &secret[1..]
    );
    std::fs::write(&f, text.replace(&secret, &flipped)).unwrap();
    let (ok, err) = run(&[
        "view",
        "--keys",
        f.to_str().unwrap(),
        "--viewer",
        "none",
        "--duration",
        "1",
    ]);
    assert!(!ok);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(f.to_str().unwrap()), "{err}");
    assert!(
        err.contains("does not belong to its `local_public`"),
        "{err}"
    );
    assert!(!err.contains("hex digits"), "{err}");
}

/// `pair --receivers 3 --watchers 1`: the drone file lists the third receiver as a watcher (its
/// SET_QUALITY is refused by the drone; the protocol's tests check that), stdout says which key
/// file watches only, and more watchers than receivers is one clear error.
#[test]
fn pair_marks_the_last_receivers_watch_only() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("keys");
    let dir_s = dir.to_str().unwrap();
    let (ok, out, err) = run_both(&[
        "pair",
        "--dir",
        dir_s,
        "--receivers",
        "3",
        "--watchers",
        "1",
    ]);
    assert!(ok, "{err}");
    let drone = std::fs::read_to_string(dir.join("drone.key")).unwrap();
    assert_eq!(drone.matches("\npeer_public=").count(), 2, "{drone}");
    assert_eq!(drone.matches("\nwatcher_public=").count(), 1, "{drone}");
    let third = std::fs::read_to_string(dir.join("receiver3.key")).unwrap();
    let third_public = third
        .lines()
        .find_map(|l| l.strip_prefix("local_public="))
        .unwrap();
    assert!(
        drone.contains(&format!("watcher_public={third_public}")),
        "{drone}"
    );
    let watch_line = out
        .lines()
        .find(|l| l.starts_with("watch only"))
        .unwrap_or("");
    assert!(watch_line.ends_with("receiver3.key"), "{out}");
    let (ok, err) = run(&["pair", "--dir", dir_s, "--force", "--watchers", "2"]);
    assert!(!ok);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--watchers 2"), "{err}");
}

/// `pair --dir` errors name the folder or file.
#[test]
fn pair_errors_name_the_path() {
    let d = tempfile::tempdir().unwrap();
    // A folder that cannot be made: its parent is a file.
    let file = d.path().join("plain-file");
    std::fs::write(&file, "x").unwrap();
    let bad = file.join("keys");
    let (ok, err) = run(&["pair", "--dir", bad.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains(bad.to_str().unwrap()), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    // A key file that cannot be written: a folder in its place.
    let dir = d.path().join("keys2");
    std::fs::create_dir_all(dir.join("drone.key")).unwrap();
    let (ok, err) = run(&["pair", "--dir", dir.to_str().unwrap(), "--force"]);
    assert!(!ok);
    assert!(
        err.contains(dir.join("drone.key").to_str().unwrap()),
        "{err}"
    );
}

/// `--duration 0` (or negative) is refused before anything starts, with one clear reason.
#[test]
fn zero_or_negative_durations_are_refused_up_front() {
    for args in [
        &["demo", "--duration", "0"][..],
        &["demo", "--duration=-3"],
        &["view", "--stock", "--duration", "0"],
        &["demo", "--listeners", "1", "--listeners-leave-after", "0"],
        &["node", "--stock", "--duration", "0"],
    ] {
        let t0 = Instant::now();
        let (ok, err) = run(args);
        assert!(!ok, "{args:?} accepted");
        assert!(t0.elapsed() < Duration::from_secs(5), "{args:?}");
        assert!(err.contains("above 0"), "{args:?}: {err}");
        assert!(!err.contains("no frame was delivered"), "{args:?}: {err}");
    }
    let (ok, err) = run(&["demo", "--fps=-1"]);
    assert!(!ok && err.contains("between 0"), "{err}");
}

/// A negative number given as a separate word (`--duration -1`) reaches the option's own check
/// and gets its reason, not clap's "unexpected argument '-1'".
#[test]
fn negative_numbers_get_the_options_own_error() {
    for (args, why) in [
        (&["demo", "--duration", "-1"][..], "above 0"),
        (&["view", "--stock", "--duration", "-1"], "above 0"),
        (&["record", "d", "--stock", "--duration", "-0.5"], "above 0"),
        (&["node", "--stock", "--duration", "-1"], "above 0"),
        (&["demo", "--rekey-secs", "-5"], "above 0"),
        (
            &["demo", "--listeners", "1", "--listeners-leave-after", "-2"],
            "above 0",
        ),
        (&["demo", "--fps", "-1"], "between 0"),
        (&["bench", "--fps", "-30"], "between 0"),
    ] {
        let t0 = Instant::now();
        let (ok, err) = run(args);
        assert!(!ok, "{args:?} accepted");
        assert!(t0.elapsed() < Duration::from_secs(5), "{args:?}");
        assert!(err.contains(why), "{args:?}: {err}");
        assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
    }
}

/// One rule for `--viewer` in every command: an address that is not HOST:PORT is refused before
/// anything starts, with one line saying what is expected; port 0 means any free port; an
/// explicit address that is taken is an error (only the default falls back to a free port).
#[test]
fn viewer_addresses_follow_one_rule() {
    for args in [
        &[
            "view",
            "--stock",
            "--viewer",
            "127.0.0.1:notaport",
            "--duration",
            "1",
        ][..],
        &["demo", "--viewer", "notaport", "--duration", "1"],
        &[
            "record",
            "d",
            "--stock",
            "--viewer",
            "127.0.0.1:",
            "--duration",
            "1",
        ],
        &["demo", "--viewer", "127.0.0.1:70000", "--duration", "1"],
    ] {
        let t0 = Instant::now();
        let (ok, err) = run(args);
        assert!(!ok, "{args:?} accepted");
        assert!(t0.elapsed() < Duration::from_secs(5), "{args:?}");
        assert!(err.contains("--viewer"), "{args:?}: {err}");
        assert!(err.contains("give HOST:PORT"), "{args:?}: {err}");
        assert!(!err.contains("free port instead"), "{args:?}: {err}");
    }

    // Taken: an error naming the address, for view and demo alike.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    for cmd in [&["view", "--stock"][..], &["demo"]] {
        let mut args = cmd.to_vec();
        args.extend(["--viewer", &addr, "--duration", "1"]);
        let (ok, err) = run(&args);
        assert!(!ok, "{args:?} accepted a taken port");
        assert!(
            err.contains(&format!("cannot serve the viewer on {addr}")),
            "{args:?}: {err}"
        );
        assert!(!err.contains("free port instead"), "{args:?}: {err}");
    }
    drop(taken);

    // Port 0: any free port, announced with the port it got (on stdout or stderr).
    let out = gapstream()
        .args([
            "demo",
            "--viewer",
            "127.0.0.1:0",
            "--duration",
            "1",
            "--fps",
            "5",
        ])
        .output()
        .unwrap();
    let err =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{err}");
    let url = err
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("viewer   http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no viewer line: {err}"));
    let port: u16 = url.split('/').next().unwrap().parse().unwrap();
    assert_ne!(port, 0, "{err}");
}

/// The demo's session line says what the run's security is: a pairing made for the run, or for
/// `--stock` (Bitcraze's plaintext stream) that there are no keys at all.
#[test]
fn the_session_line_says_whether_there_are_keys() {
    for (stock, want, not) in [
        (
            true,
            "(no keys: the stock stream has no pairing)",
            "pairing made",
        ),
        (false, "(pairing made for this run)", "no keys"),
    ] {
        let mut args = vec!["demo", "--duration", "1", "--viewer", "none", "--fps", "5"];
        if stock {
            args.push("--stock");
        }
        let out = gapstream().args(&args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{args:?}: {text}");
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with("session "))
            .unwrap_or_else(|| panic!("no session line: {text}"));
        assert!(line.contains(want), "{args:?}: {line}");
        assert!(!line.contains(not), "{args:?}: {line}");
    }
}

/// `--fps 0` means "as fast as possible" and is announced so, not as "at 0 fps".
#[test]
fn fps_zero_is_announced_as_unpaced() {
    let (ok, out, err) = run_both(&[
        "demo",
        "--fps",
        "0",
        "--duration",
        "1.5",
        "--viewer",
        "none",
    ]);
    assert!(ok, "{out}{err}");
    assert!(!out.contains("at 0 fps"), "{out}");
    assert!(
        out.contains("as fast as it can (--fps 0: no pacing)"),
        "{out}"
    );
}

/// The run's figures (banner, a status line every 0.5 s, the closing summary) go to stdout, the
/// diagnostics (errors, warnings, the receiver's notes) to stderr: `gapstream view > run.log`
/// keeps the figures and the terminal still shows what went wrong.
#[test]
fn figures_go_to_stdout_and_diagnostics_to_stderr() {
    let (ok, out, err) = run_both(&["demo", "--fps", "10", "--duration", "2", "--viewer", "none"]);
    assert!(ok, "{out}{err}");
    assert!(out.starts_with("gapstream demo: "), "{out}");
    assert!(out.contains("  session  "), "{out}");
    let status = out
        .lines()
        .filter(|l| l.contains(" fps ") && l.contains("  lost "))
        .count();
    assert!(status >= 2, "{status} status lines on stdout:\n{out}");
    let summary = out.lines().last().unwrap_or_default();
    assert!(
        summary.starts_with("gapstream: ") && summary.contains(" frames in "),
        "{out}"
    );
    for l in err.lines() {
        assert!(
            !l.contains(" frames in ") && !l.contains("  lost ") && !l.contains("  session  "),
            "a figure on stderr: {l}\n{err}"
        );
    }
    // The handshake is a note of the receiver: stderr.
    assert!(
        err.contains("gapstream: handshake with the drone done"),
        "{err}"
    );

    // An error: one line on stderr, nothing on stdout.
    let (ok, out, err) = run_both(&[
        "view",
        "--keys",
        "no/such/receiver.key",
        "--duration",
        "1",
        "--viewer",
        "none",
    ]);
    assert!(!ok);
    assert_eq!(out, "", "{err}");
    assert!(err.starts_with("gapstream: error: "), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// Waits for a line containing `what` (at most `secs`), keeping every line seen.
fn wait_line(
    lines: &mpsc::Receiver<String>,
    seen: &mut Vec<String>,
    what: &str,
    secs: u64,
) -> String {
    let t0 = Instant::now();
    loop {
        let left = Duration::from_secs(secs).saturating_sub(t0.elapsed());
        let l = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no `{what}` line: {seen:#?}"));
        seen.push(l.clone());
        if l.contains(what) {
            return l;
        }
    }
}

/// `demo --keys-dir DIR` writes the run's pairing; `gapstream record` attaches to the running
/// demo with a spare receiver key, announces itself as `record`, and names each file with the
/// frame number burned into its pixels.
#[test]
fn record_attaches_to_a_running_demo_and_numbers_files_by_the_burned_in_frame() {
    let d = tempfile::tempdir().unwrap();
    let keys = d.path().join("keys");
    let out = d.path().join("frames");
    let (mut demo, lines) = spawn(&[
        "demo",
        "--viewer",
        "none",
        "--fps",
        "10",
        "--keys-dir",
        keys.to_str().unwrap(),
    ]);
    let mut seen = Vec::new();
    let bridge = wait_line(&lines, &mut seen, "  bridge ", 60);
    let tcp = bridge
        .split("TCP ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap()
        .to_string();
    let keys_line = wait_line(&lines, &mut seen, "  keys ", 10);
    let spare = keys.join("receiver2.key");
    assert!(keys_line.contains(spare.to_str().unwrap()), "{keys_line}");
    // A few frames of the demo first, so the recorder joins a stream well under way.
    wait_line(&lines, &mut seen, "frames ", 30);
    thread::sleep(Duration::from_millis(1500));
    let (ok, rec_out, err) = run_both(&[
        "record",
        out.to_str().unwrap(),
        "--connect",
        &tcp,
        "--keys",
        spare.to_str().unwrap(),
        "--viewer",
        "none",
        "--duration",
        "3",
    ]);
    sigint(demo.id());
    let _ = demo.wait();
    assert!(ok, "{rec_out}{err}");
    assert!(rec_out.starts_with("gapstream record: "), "{rec_out}");
    assert!(!rec_out.contains("gapstream view"), "{rec_out}");
    let mut files: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 5, "{files:?}\n{err}");
    let first: u64 = files[0].file_stem().unwrap().to_str().unwrap()[6..]
        .parse()
        .unwrap();
    assert!(
        first > 10,
        "numbered from the drone's frame count, not from 0: {files:?}"
    );
    for f in &files {
        let n: u32 = f.file_stem().unwrap().to_str().unwrap()[6..]
            .parse()
            .unwrap();
        let img = gapstream::images::load_image(f).unwrap();
        let stamp = gapstream_drone::testpattern::decode(&img.pixels, img.width, img.height)
            .expect("a test-pattern frame");
        assert_eq!(stamp.frame, n, "{}", f.display());
    }
    // A second run replaces the demo's own key files, never a real pairing.
    let (ok, _) = run(&["pair", "--dir", d.path().join("real").to_str().unwrap()]);
    assert!(ok);
    let (ok, err) = run(&[
        "demo",
        "--keys-dir",
        d.path().join("real").to_str().unwrap(),
        "--duration",
        "1",
        "--viewer",
        "none",
    ]);
    assert!(!ok);
    assert!(err.contains("is not a demo run's key file"), "{err}");
}

/// `demo --keylog FILE`: the warning on standard error, and every receiver of the run (the one
/// with the viewer and a listener) appends its key-log lines to FILE (mode 0600), one per epoch
/// and session in the documented format (docs/protocol.md §12).
#[test]
fn demo_keylog_writes_every_receivers_epoch_keys() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("keys.log");
    let out = with_keylog(
        &[
            "demo",
            "--viewer",
            "none",
            "--duration",
            "3",
            "--listeners",
            "1",
        ],
        &file,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("key log ON"), "{err}");
    let sessions = keylog_sessions(&file);
    assert!(sessions.len() >= 2, "lines of {} sessions", sessions.len());
}

/// Runs `gapstream ARGS --keylog FILE` to its end (the environment's key-log variable removed).
fn with_keylog(args: &[&str], file: &std::path::Path) -> std::process::Output {
    gapstream()
        .args(args)
        .arg("--keylog")
        .arg(file)
        .env_remove("GAPSTREAM_KEYLOGFILE")
        .output()
        .unwrap()
}

/// The sessions of a key-log file, checking the file's mode (0600) and every line's format
/// (docs/protocol.md §12).
fn keylog_sessions(file: &std::path::Path) -> std::collections::BTreeSet<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let text = std::fs::read_to_string(file).unwrap();
    let mut sessions = std::collections::BTreeSet::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f.len(), 10, "{line}");
        assert_eq!(f[0], "GAPSTREAM_KEYLOG_V2");
        assert_eq!(f[1].len(), 16, "{line}");
        assert_eq!(f[3], "chacha20poly1305");
        assert_eq!(f[4].len(), 64, "{line}");
        sessions.insert(f[1].to_string());
    }
    sessions
}

/// `gapstream ground --keylog FILE` and `gapstream demo --drones N --keylog FILE`: every drone's
/// receiver appends its epoch keys to the one file, each drone's session under its own id.
#[test]
fn a_ground_stations_keylog_has_every_drones_epoch_keys() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("swarm");
    let mut swarm = gapstream()
        .args([
            "swarm",
            "--drones",
            "2",
            "--wifi-mbps",
            "0",
            "--duration",
            "60",
        ])
        .arg("--dir")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let fleet = dir.join("fleet.toml");
    let t0 = Instant::now();
    while !fleet.exists() && t0.elapsed() < Duration::from_secs(60) {
        thread::sleep(Duration::from_millis(100));
    }
    let file = d.path().join("ground.log");
    let fleet = fleet.to_str().unwrap();
    let out = with_keylog(
        &[
            "ground",
            "--viewer",
            "none",
            "--duration",
            "3",
            "--fleet",
            fleet,
        ],
        &file,
    );
    let _ = swarm.kill();
    let _ = swarm.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("key log ON"), "{err}");
    let sessions = keylog_sessions(&file);
    assert!(sessions.len() >= 2, "ground: {} sessions", sessions.len());

    let file = d.path().join("demo.log");
    let out = with_keylog(
        &[
            "demo",
            "--drones",
            "2",
            "--viewer",
            "none",
            "--duration",
            "3",
        ],
        &file,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let sessions = keylog_sessions(&file);
    assert!(
        sessions.len() >= 2,
        "demo --drones: {} sessions",
        sessions.len()
    );
}

/// Diagnoses that name the cause, against a running demo: a receiver whose key the drone was not
/// paired with keeps retrying its refused handshakes and its closing line names that key file; two
/// receivers sharing one key (each handshake replaces the other's session at the drone, which then
/// rekeys without the replaced one) are told so.
#[test]
fn an_unpaired_key_and_a_key_used_twice_are_named_as_the_causes() {
    let d = tempfile::tempdir().unwrap();
    let keys = d.path().join("keys");
    let (mut demo, lines) = spawn(&[
        "demo",
        "--viewer",
        "none",
        "--fps",
        "10",
        "--rekey-secs",
        "2",
        "--keys-dir",
        keys.to_str().unwrap(),
    ]);
    let mut seen = Vec::new();
    let bridge = wait_line(&lines, &mut seen, "  bridge ", 60);
    let tcp = bridge
        .split("TCP ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap()
        .to_string();
    wait_line(&lines, &mut seen, "frames ", 60);
    let other = d.path().join("other");
    assert!(run(&["pair", "--dir", other.to_str().unwrap()]).0);
    let unpaired = other.join("receiver.key");
    let view = move |key: &std::path::Path, secs: &str| {
        let args = [
            "view",
            "--connect",
            tcp.as_str(),
            "--keys",
            key.to_str().unwrap(),
            "--viewer",
            "none",
            "--duration",
            secs,
        ];
        let out = gapstream().args(args).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, err) = view(&unpaired, "6");
    assert!(!ok, "{err}");
    let last = err.lines().last().unwrap();
    assert!(
        last.starts_with("gapstream: error: no frame was delivered in ")
            && last.contains(" s: the drone refused ")
            && last.contains(&format!(
                "while the bridge was up: the receiver key {} is most likely not paired with this drone",
                unpaired.display()
            )),
        "{err}"
    );
    // It kept retrying meanwhile (a forged refusal must not stop a receiver).
    let attempts = err.matches("handshake attempt failed").count();
    assert!(attempts >= 2, "{attempts} attempts: {err}");

    // Two receivers with the same key, side by side.
    let shared = keys.join("receiver2.key");
    let both: Vec<_> = [20, 17]
        .into_iter()
        .map(|secs| {
            thread::sleep(Duration::from_secs(3));
            let (shared, view) = (shared.clone(), view.clone());
            thread::spawn(move || view(&shared, &secs.to_string()))
        })
        .collect();
    let outs: Vec<(bool, String)> = both.into_iter().map(|t| t.join().unwrap()).collect();
    sigint(demo.id());
    let _ = demo.wait();
    let told = outs
        .iter()
        .any(|(_, e)| e.contains("another receiver is most likely using the same receiver key"));
    assert!(told, "{outs:#?}");
}
