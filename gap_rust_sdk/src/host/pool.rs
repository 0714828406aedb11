//! A persistent pool of worker threads standing in for cluster cores 1..8 (core 0 is the caller).
//!
//! Spawning 7 threads per fork costs tens of microseconds each on a small machine; the engine forks
//! once per buffer round, so the pool keeps the threads and wakes them per fork.
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// A job as the workers see it: a lifetime-erased `&(dyn Fn(usize) + Sync)`.
#[derive(Clone, Copy)]
struct JobRef(*const (dyn Fn(usize) + Sync + 'static));
// SAFETY: the pointee is `Sync`, so calling it from several threads through a shared pointer is
// fine; `Pool::run` keeps it alive until every worker that received it is done (see there).
unsafe impl Send for JobRef {}

struct State {
    epoch: u64,
    job: Option<JobRef>,
    cores: usize,
    pending: usize,
    panicked: bool,
    shutdown: bool,
}

struct Inner {
    state: Mutex<State>,
    go: Condvar,
    done: Condvar,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic never happens while the lock is held (jobs run unlocked), so poisoning carries no
    // broken invariant; recover the guard.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) struct Pool {
    inner: Arc<Inner>,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    /// A pool for teams of up to `cores` (the caller is core 0, so `cores - 1` threads).
    pub(crate) fn new(cores: usize) -> Pool {
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                epoch: 0,
                job: None,
                cores: 0,
                pending: 0,
                panicked: false,
                shutdown: false,
            }),
            go: Condvar::new(),
            done: Condvar::new(),
        });
        let threads = (1..cores)
            .map(|id| {
                let inner = inner.clone();
                std::thread::Builder::new()
                    .name(format!("cluster-core-{id}"))
                    .spawn(move || worker(&inner, id))
                    .expect("spawning a host cluster thread")
            })
            .collect();
        Pool { inner, threads }
    }

    /// Runs `job(i)` for `i in 0..cores` (0 on the calling thread) and returns when all are done.
    /// Returns `false` if any of them panicked.
    pub(crate) fn run(&self, cores: usize, job: &(dyn Fn(usize) + Sync)) -> bool {
        assert!(cores >= 1 && cores <= self.threads.len() + 1);
        // SAFETY: only the lifetime is erased. The pointer is published under the lock, and this
        // function does not return (normally or by unwinding: core 0's call is caught below, and
        // nothing else here panics) before `pending` is 0, i.e. before every worker that read the
        // pointer has finished calling it; the pointer is cleared before returning.
        let erased: JobRef = JobRef(unsafe {
            core::mem::transmute::<
                *const (dyn Fn(usize) + Sync + '_),
                *const (dyn Fn(usize) + Sync + 'static),
            >(job)
        });
        {
            let mut st = lock(&self.inner.state);
            st.job = Some(erased);
            st.cores = cores;
            st.pending = cores - 1;
            st.panicked = false;
            st.epoch += 1;
        }
        self.inner.go.notify_all();
        let ok0 = catch_unwind(AssertUnwindSafe(|| job(0))).is_ok();
        let mut st = lock(&self.inner.state);
        while st.pending > 0 {
            st = self.inner.done.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.job = None;
        ok0 && !st.panicked
    }
}

fn worker(inner: &Inner, id: usize) {
    let mut seen = 0u64;
    loop {
        let job = {
            let mut st = lock(&inner.state);
            while !st.shutdown && st.epoch == seen {
                st = inner.go.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            if st.shutdown {
                return;
            }
            seen = st.epoch;
            if id >= st.cores {
                continue;
            }
            st.job.expect("a job is published with every epoch")
        };
        // SAFETY: `Pool::run` keeps the job alive until this worker decrements `pending` below.
        let ok = catch_unwind(AssertUnwindSafe(|| unsafe { (*job.0)(id) })).is_ok();
        let mut st = lock(&inner.state);
        st.panicked |= !ok;
        st.pending -= 1;
        if st.pending == 0 {
            inner.done.notify_all();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        lock(&self.inner.state).shutdown = true;
        self.inner.go.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A reusable barrier for one team; a panicking core poisons it so the others panic instead of
/// waiting forever.
pub(crate) struct Barrier {
    cores: usize,
    state: Mutex<(usize, u64, bool)>,
    cv: Condvar,
}

impl Barrier {
    pub(crate) fn new(cores: usize) -> Barrier {
        Barrier {
            cores,
            state: Mutex::new((0, 0, false)),
            cv: Condvar::new(),
        }
    }

    pub(crate) fn wait(&self) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        assert!(!st.2, "barrier poisoned: another core panicked");
        st.0 += 1;
        if st.0 == self.cores {
            st.0 = 0;
            st.1 += 1;
            self.cv.notify_all();
            return;
        }
        let generation = st.1;
        while st.1 == generation && !st.2 {
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        assert!(!st.2, "barrier poisoned: another core panicked");
    }

    pub(crate) fn poison(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).2 = true;
        self.cv.notify_all();
    }
}
