//! Starting a program without `fork`: a vfork-style `clone` that switches the user and joins
//! the attempt's cgroups in the child before `exec`.
//!
//! Why not `std::process::Command`: std starts a process with `posix_spawn` (a vfork-style
//! clone) only when nothing has to happen in the child; a uid, a gid or a `pre_exec` hook makes
//! it `fork`. A `fork` of the server is dear in a way that grows with the server: the kernel
//! copies its page tables and write-protects every page, and afterwards each page the server's
//! threads write takes a copy-on-write fault with a TLB shoot-down on every core. Measured on
//! the 2-core reference VM (`weir bench serve --dispatch`, tasks as `weir-task` in their own
//! cgroups): two thirds of all CPU time went to those faults, and dispatch ran 3x slower than
//! without isolation (BENCHMARKS.md, issue 17).
//!
//! `clone(CLONE_VM | CLONE_VFORK)` shares the server's memory with the child until it calls
//! `exec`, and suspends only the calling thread meanwhile: nothing is copied. The price is the
//! discipline `posix_spawn` itself keeps, and which this module keeps too:
//! - Everything the child needs (argument and environment arrays, the working folder) is built
//!   by the parent before the clone; the child allocates nothing, takes no lock, touches no
//!   Rust or C library state, and writes only its own [`Shared`] record.
//! - Identity changes are raw system calls: glibc's `setuid` and friends would broadcast the
//!   change to every thread of "the process" — the server's threads, whose memory the child
//!   shares.
//! - Every signal is blocked around the clone (with the raw system call, so that glibc's own
//!   internal signals are blocked too); the child sets every caught signal back to its default
//!   action (the handlers are the server's code) and restores the server's mask just before
//!   `exec`.
//! - The child runs on a stack of its own (with a guard page), never on the parent's.
//! - A step that fails records which step and its `errno` in [`Shared`] and exits with 127; the
//!   parent, resumed when the child has exec'd or exited, turns that into an error and reaps
//!   the child.
//!
//! Descriptors: the child closes every inherited descriptor above 2 (one `close_range`,
//! leaving only the cgroup files it still has to write) before it joins its cgroups, which
//! can wait for an RCU grace period. So a server killed meanwhile leaves no child holding its
//! listening socket or its data directory's lock, and a server restarted at once can bind and
//! lock again.

use std::ffi::{c_char, c_int, c_void, CString};
use std::io;
use std::ptr;

/// What to start. All strings are NUL-free (the caller checks).
pub(crate) struct Program {
    /// The program's path (absolute: no `PATH` search).
    pub path: CString,
    /// The whole argument vector, `argv[0]` included.
    pub argv: Vec<CString>,
    /// The whole environment, as `NAME=value`.
    pub env: Vec<CString>,
    /// The working folder, entered after the user switch (so with the task's permissions).
    pub workdir: CString,
    /// Standard input, output and error: descriptors of the parent, duplicated onto 0, 1, 2.
    pub stdio: [c_int; 3],
    /// `(uid, gid)` to switch to, supplementary groups cleared (the parent must be root).
    pub user: Option<(u32, u32)>,
    /// Open `cgroup.procs` files the child writes `0` to (joining those cgroups), as root,
    /// before the user switch.
    pub cgroups: Vec<c_int>,
}

/// The steps of the child, in order, for the error message of a failed start.
const STEPS: [&str; 8] = [
    "set up the child",
    "start a process group",
    "set up standard input, output and error",
    "join the attempt's cgroup",
    "clear the supplementary groups",
    "switch to the task's group and user",
    "enter the working folder",
    "exec",
];
const STEP_PGROUP: c_int = 1;
const STEP_STDIO: c_int = 2;
const STEP_CGROUP: c_int = 3;
const STEP_GROUPS: c_int = 4;
const STEP_IDS: c_int = 5;
const STEP_CHDIR: c_int = 6;
const STEP_EXEC: c_int = 7;

/// Shared by parent and child (the child writes, while the parent is suspended).
#[repr(C)]
struct Shared {
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    workdir: *const c_char,
    stdio: [c_int; 3],
    switch_user: bool,
    uid: u32,
    gid: u32,
    cgroups: *const c_int,
    n_cgroups: usize,
    /// The parent's signal mask (a kernel `sigset_t`: 64 bits on Linux).
    old_mask: u64,
    /// The step the child reached; `STEP_EXEC` with `errno` 0 once it calls `exec`.
    step: c_int,
    errno: c_int,
}

const STACK_SIZE: usize = 256 * 1024;

/// Starts `p`; returns the child's pid once it has exec'd. The child is not reaped: the caller
/// owns it (and typically opens a pidfd on it at once).
pub(crate) fn spawn(p: &Program) -> io::Result<i32> {
    let argv: Vec<*const c_char> = p.argv.iter().map(|a| a.as_ptr()).chain([ptr::null()]).collect();
    let envp: Vec<*const c_char> = p.env.iter().map(|e| e.as_ptr()).chain([ptr::null()]).collect();
    let (switch_user, uid, gid) = match p.user {
        Some((uid, gid)) => (true, uid, gid),
        None => (false, 0, 0),
    };
    let mut shared = Shared {
        path: p.path.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        workdir: p.workdir.as_ptr(),
        stdio: p.stdio,
        switch_user,
        uid,
        gid,
        cgroups: p.cgroups.as_ptr(),
        n_cgroups: p.cgroups.len(),
        old_mask: 0,
        step: 0,
        errno: 0,
    };
    let stack = Stack::new()?;
    let all: u64 = !0;
    // SAFETY: `rt_sigprocmask` with valid pointers to 8-byte sets (the kernel's sigset size).
    let blocked = unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &all as *const u64,
            &mut shared.old_mask as *mut u64,
            8,
        )
    };
    if blocked != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `child` follows the vfork rules above; `shared`, the arrays it points to and the
    // stack outlive the child's use of them (the parent is suspended until exec or exit).
    let pid = unsafe {
        libc::clone(
            child,
            stack.top(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &mut shared as *mut Shared as *mut c_void,
        )
    };
    let clone_error = io::Error::last_os_error();
    // SAFETY: as above; restores the mask saved by the first call.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &shared.old_mask as *const u64,
            ptr::null_mut::<u64>(),
            8,
        );
    }
    if pid < 0 {
        return Err(clone_error);
    }
    // The child wrote these while this thread was suspended; read them through volatile loads.
    // SAFETY: plain reads of fields of a live local.
    let (step, errno) = unsafe { (ptr::read_volatile(&shared.step), ptr::read_volatile(&shared.errno)) };
    if step == STEP_EXEC && errno == 0 {
        return Ok(pid);
    }
    // It failed before or at exec and has exited (status 127): reap it.
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let what = STEPS.get(step as usize).copied().unwrap_or("start");
    let cause = if errno != 0 {
        io::Error::from_raw_os_error(errno)
    } else {
        io::Error::other(format!("the child ended before exec (wait status {status})"))
    };
    Err(io::Error::new(cause.kind(), format!("{what}: {cause}")))
}

/// The child's stack: an anonymous mapping with a guard page at its low end.
struct Stack {
    base: *mut c_void,
}

impl Stack {
    fn new() -> io::Result<Stack> {
        // SAFETY: a fresh private anonymous mapping, owned by the returned value.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                STACK_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Stack { base };
        // SAFETY: the first page of the mapping made above.
        if unsafe { libc::mprotect(base, page_size(), libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The highest address, 16-byte aligned (the stack grows down).
    fn top(&self) -> *mut c_void {
        ((self.base as usize + STACK_SIZE) & !15) as *mut c_void
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping this value owns; the child no longer runs on it.
        unsafe { libc::munmap(self.base, STACK_SIZE) };
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// Records the failed step's errno and ends the child.
///
/// SAFETY (for callers): only in the child.
unsafe fn fail(s: *mut Shared, step: c_int) -> ! {
    let errno = *libc::__errno_location();
    ptr::write_volatile(&mut (*s).step, step);
    ptr::write_volatile(&mut (*s).errno, if errno == 0 { libc::EIO } else { errno });
    libc::_exit(127)
}

/// The child: raw system calls only (see the module comment).
extern "C" fn child(arg: *mut c_void) -> c_int {
    let s = arg as *mut Shared;
    // SAFETY: `arg` is the parent's `Shared`, valid while the parent is suspended; every call
    // below is a system call (or glibc's direct wrapper of one) on data prepared by the parent.
    unsafe {
        // The server's handlers are its own code: back to the defaults before anything can
        // be delivered (everything is blocked until just before exec).
        for sig in 1..=64 {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, ptr::null(), &mut old) == 0
                && old.sa_sigaction != libc::SIG_DFL
                && old.sa_sigaction != libc::SIG_IGN
            {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &dfl, ptr::null_mut());
            }
        }
        if libc::syscall(libc::SYS_setpgid, 0, 0) != 0 {
            fail(s, STEP_PGROUP);
        }
        // Standard descriptors: first move any source that is itself 0, 1 or 2 out of the way.
        let mut stdio = (*s).stdio;
        for fd in stdio.iter_mut() {
            if *fd < 3 {
                let moved = libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 3);
                if moved < 0 {
                    fail(s, STEP_STDIO);
                }
                *fd = moved;
            }
        }
        for (target, fd) in stdio.iter().enumerate() {
            if libc::dup2(*fd, target as c_int) < 0 {
                fail(s, STEP_STDIO);
            }
        }
        // Close everything above 2 but the cgroup files (sorted ascending by the caller).
        let cgroups = std::slice::from_raw_parts((*s).cgroups, (*s).n_cgroups);
        let mut low: libc::c_uint = 3;
        for &fd in cgroups {
            let fd = fd as libc::c_uint;
            if fd > low {
                libc::syscall(libc::SYS_close_range, low, fd - 1, 0);
            }
            low = low.max(fd + 1);
        }
        // Best effort: without close_range (Linux < 5.9) exec still closes them all (every
        // descriptor of the server is close-on-exec).
        libc::syscall(libc::SYS_close_range, low, libc::c_uint::MAX, 0);
        for &fd in cgroups {
            if libc::write(fd, b"0".as_ptr() as *const c_void, 1) != 1 {
                fail(s, STEP_CGROUP);
            }
            libc::close(fd);
        }
        if (*s).switch_user {
            if libc::syscall(libc::SYS_setgroups, 0, ptr::null::<libc::gid_t>()) != 0 {
                fail(s, STEP_GROUPS);
            }
            if libc::syscall(libc::SYS_setgid, (*s).gid) != 0
                || libc::syscall(libc::SYS_setuid, (*s).uid) != 0
            {
                fail(s, STEP_IDS);
            }
        }
        if libc::chdir((*s).workdir) != 0 {
            fail(s, STEP_CHDIR);
        }
        ptr::write_volatile(&mut (*s).step, STEP_EXEC);
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &(*s).old_mask as *const u64,
            ptr::null_mut::<u64>(),
            8,
        );
        libc::execve((*s).path, (*s).argv, (*s).envp);
        // Signals are unblocked again here, but only exec's failure is left to record.
        fail(s, STEP_EXEC)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    fn c(s: &str) -> CString {
        CString::new(s).unwrap()
    }

    fn pipe() -> (std::fs::File, OwnedFd) {
        let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
        (std::fs::File::from(r), w)
    }

    fn wait(pid: i32) -> i32 {
        let mut status = 0;
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        status
    }

    fn program(script: &str, out: c_int, workdir: &str) -> Program {
        let devnull = std::fs::File::open("/dev/null").unwrap();
        let null = devnull.as_raw_fd();
        std::mem::forget(devnull);
        Program {
            path: c("/bin/sh"),
            argv: vec![c("/bin/sh"), c("-c"), c(script)],
            env: vec![c("A=1"), c("PATH=/usr/bin:/bin")],
            workdir: c(workdir),
            stdio: [null, out, out],
            user: None,
            cgroups: Vec::new(),
        }
    }

    #[test]
    fn the_child_gets_its_arguments_environment_folder_group_and_no_inherited_descriptors() {
        let (mut r, w) = pipe();
        // A descriptor the parent holds without close-on-exec: the child must not inherit it.
        let leaked = unsafe { OwnedFd::from_raw_fd(libc::dup(w.as_raw_fd())) };
        let p = program(
            &format!("echo \"$A $(pwd) $(ls /proc/self/fd | wc -l)\"; ps -o pgid= -p $$ | tr -d ' '; test -e /proc/self/fd/{}", leaked.as_raw_fd()),
            w.as_raw_fd(),
            "/tmp",
        );
        let pid = spawn(&p).expect("spawn");
        drop(w);
        drop(leaked);
        let mut out = String::new();
        r.read_to_string(&mut out).unwrap();
        let status = wait(pid);
        let lines: Vec<&str> = out.lines().collect();
        // `ls /proc/self/fd` in a pipeline: 0, 1, 2 and its own directory descriptor.
        assert_eq!(lines[0], "1 /tmp 4", "{out}");
        assert_eq!(lines[1], pid.to_string(), "its own process group");
        assert_ne!(status, 0, "the leaked descriptor must be closed: {out}");
    }

    #[test]
    fn a_failed_step_is_an_error_naming_it() {
        let (_r, w) = pipe();
        let p = program("true", w.as_raw_fd(), "/nonexistent/folder");
        let err = spawn(&p).expect_err("chdir fails");
        assert!(err.to_string().starts_with("enter the working folder:"), "{err}");
        assert_eq!(err.raw_os_error(), None);
        assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");

        let mut p = program("true", w.as_raw_fd(), "/tmp");
        p.path = c("/nonexistent/sh");
        let err = spawn(&p).expect_err("exec fails");
        assert!(err.to_string().starts_with("exec:"), "{err}");
    }

    #[test]
    fn the_server_signal_handlers_and_mask_do_not_reach_the_child() {
        // A handler for SIGUSR1 in this process: the child must see the default action.
        extern "C" fn ignore(_: c_int) {}
        unsafe {
            let mut a: libc::sigaction = std::mem::zeroed();
            a.sa_sigaction = ignore as extern "C" fn(c_int) as usize;
            assert_eq!(libc::sigaction(libc::SIGUSR1, &a, ptr::null_mut()), 0);
        }
        let (mut r, w) = pipe();
        let p = program("kill -USR1 $$; echo survived", w.as_raw_fd(), "/");
        let pid = spawn(&p).expect("spawn");
        drop(w);
        let mut out = String::new();
        r.read_to_string(&mut out).unwrap();
        let status = wait(pid);
        assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGUSR1, "{status} {out}");
        assert_eq!(out, "");
    }
}
