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
    let out = gapstream().args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Starts `gapstream args` with stderr piped line by line into a channel.
fn spawn(args: &[&str]) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut child = gapstream()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(err).lines() {
            let Ok(l) = line else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
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
    // Streaming: a status line with frames > 0 (one line per 0.5 s when stderr is not a terminal).
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

/// `--fps 0` means "as fast as possible" and is announced so, not as "at 0 fps".
#[test]
fn fps_zero_is_announced_as_unpaced() {
    let (ok, err) = run(&[
        "demo",
        "--fps",
        "0",
        "--duration",
        "1.5",
        "--viewer",
        "none",
    ]);
    assert!(ok, "{err}");
    assert!(!err.contains("at 0 fps"), "{err}");
    assert!(
        err.contains("as fast as it can (--fps 0: no pacing)"),
        "{err}"
    );
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
    let (ok, err) = run(&[
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
    assert!(ok, "{err}");
    assert!(err.starts_with("gapstream record: "), "{err}");
    assert!(!err.contains("gapstream view"), "{err}");
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
