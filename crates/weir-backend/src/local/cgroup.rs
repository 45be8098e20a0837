//! Each attempt in its own cgroup, so that a kill reaches everything the task started (also a
//! child that called `setsid` and left the process group) and its cpu and memory are capped.
//!
//! What the machine offers is found once per process ([`Hierarchies::get`]) from
//! `/proc/self/mountinfo` and `/proc/self/cgroup`:
//! - cgroup v2 (the unified hierarchy, at `/sys/fs/cgroup` or, on hybrid machines, at
//!   `/sys/fs/cgroup/unified`): membership and kill (`cgroup.kill`, Linux 5.14+), and limits
//!   (`cpu.max`, `memory.max`) when the `cpu` and `memory` controllers can be enabled for the
//!   attempts' subtree.
//! - cgroup v1 `memory` and `cpu` hierarchies: limits (`memory.limit_in_bytes`,
//!   `cpu.cfs_quota_us`) where v2 cannot give them; and membership when there is no v2.
//!
//! Attempts' cgroups are made below the server's own cgroup (never at the top of a hierarchy,
//! so whatever limits the server's own cgroup carries also bound its tasks):
//! `OWN/weir/TAG/SLOT`, TAG naming the backend's state folder (two servers on one machine,
//! or one server's several clusters, never share a folder).
//!
//! Cgroups are kept and re-used ([`Pool`]): an attempt gets a slot (`PREFIX-N`: a cgroup of
//! that name in every hierarchy used, its `cgroup.procs` files kept open) and gives it back
//! once its end is stored and it is forgotten. Making and removing cgroups per attempt (a v1
//! `memory` and `cpu` cgroup: per-cpu statistics, scheduler entities, the bandwidth check over
//! every cpu cgroup; the v2 one; the opens of their files) was the largest cost of an isolated
//! start. A slot holds one attempt at a time, so each attempt is still alone in its cgroups.
//! Slot names are unique to one backend value (process id, start time, a counter), so a record
//! from before a restart never names a slot in use, and within one backend value every use of
//! a record's cgroups (adopt of an ended attempt, kill, forget) asks the pool who owns the slot
//! first ([`Placement::owner`]): a stale record can never reach a later attempt's processes.
//! After a restart, an attempt found without its record is placed by its process's
//! `/proc/PID/cgroup` (or the `cgroup.procs` files a child not yet exec'd holds open).
//!
//! A task joins its cgroups between clone and exec (it writes `0` to the `cgroup.procs` files
//! the backend opened before the clone, with the backend's credentials), so it never runs a single
//! instruction outside them and has no process to fork before it is contained. The files are
//! the backend's (root's): a task cannot move itself out.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::process::{kill_process, Pid, Signal};
use weir_model::Resources;

/// The controllers weir uses for limits.
const LIMIT_CONTROLLERS: [&str; 2] = ["cpu", "memory"];

/// The cgroup hierarchies of this machine that this process sits in.
#[derive(Clone, Debug, Default)]
pub(crate) struct Hierarchies {
    /// The v2 hierarchy: the folder of this process's own cgroup.
    v2: Option<PathBuf>,
    /// v1 hierarchies by controller (`memory`, `cpu`): the folder of this process's own cgroup.
    v1: BTreeMap<String, PathBuf>,
}

impl Hierarchies {
    /// This process's hierarchies, read once.
    pub(crate) fn get() -> &'static Hierarchies {
        static ONCE: OnceLock<Hierarchies> = OnceLock::new();
        ONCE.get_or_init(|| {
            let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
            let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
            Hierarchies::parse(&mountinfo, &own)
        })
    }

    /// From the text of `/proc/self/mountinfo` and `/proc/self/cgroup`.
    pub(crate) fn parse(mountinfo: &str, own: &str) -> Hierarchies {
        // Own cgroup path by hierarchy: "0::/p" for v2, "N:ctl1,ctl2:/p" for v1.
        let mut v2_path = None;
        let mut v1_paths: BTreeMap<String, String> = BTreeMap::new();
        for line in own.lines() {
            let mut f = line.splitn(3, ':');
            let (Some(_), Some(ctls), Some(path)) = (f.next(), f.next(), f.next()) else { continue };
            if ctls.is_empty() {
                v2_path = Some(path.to_string());
            } else {
                for c in ctls.split(',') {
                    v1_paths.insert(c.to_string(), path.to_string());
                }
            }
        }
        let mut h = Hierarchies::default();
        for line in mountinfo.lines() {
            // ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS
            let Some((left, right)) = line.split_once(" - ") else { continue };
            let left: Vec<&str> = left.split(' ').collect();
            let right: Vec<&str> = right.split(' ').collect();
            if left.len() < 5 || right.len() < 3 {
                continue;
            }
            let (root, mount) = (left[3], PathBuf::from(unescape(left[4])));
            let below = |path: &str| -> Option<PathBuf> {
                // The mount shows the hierarchy from `root` down; our path must be under it.
                let rel = path.strip_prefix(root)?.trim_start_matches('/');
                Some(if rel.is_empty() { mount.clone() } else { mount.join(rel) })
            };
            match right[0] {
                "cgroup2" => {
                    if let Some(p) = v2_path.as_deref().and_then(below) {
                        h.v2.get_or_insert(p);
                    }
                }
                "cgroup" => {
                    for opt in right[2].split(',') {
                        if LIMIT_CONTROLLERS.contains(&opt) {
                            if let Some(p) = v1_paths.get(opt).and_then(|p| below(p)) {
                                h.v1.entry(opt.to_string()).or_insert(p);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        h
    }
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(s: &str) -> String {
    s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
}

/// A folder under which attempts get cgroups, kept open: an attempt's cgroup is made, opened,
/// and removed relative to it (`mkdirat`, `openat`, …), so each call walks one or two
/// path components instead of the whole `/sys/fs/cgroup/…/weir/TAG/…` path.
#[derive(Clone, Debug)]
struct Base {
    path: PathBuf,
    /// `O_PATH` descriptor of `path`; `None` if it could not be opened (absolute paths then).
    fd: Option<Arc<OwnedFd>>,
}

impl Base {
    fn new(path: PathBuf) -> Base {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::open(&path, flags, Mode::empty()).ok().map(Arc::new);
        Base { path, fd }
    }

    fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Makes cgroup `name`; an existing one is fine (left by a start that crashed). A base
    /// folder removed under the backend (a backend of the same folder dropped after this one
    /// was made removes it when empty) is made again, and the paths used from then on.
    fn mkdir(&self, name: &str) -> io::Result<()> {
        let relative = self
            .fd
            .as_ref()
            .map(|fd| rustix::fs::mkdirat(fd, name, Mode::from_raw_mode(0o755)).map_err(io::Error::from));
        let made = match relative {
            Some(Err(e)) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir_all(&self.path).and_then(|()| fs::create_dir(self.join(name)))
            }
            Some(r) => r,
            None => fs::create_dir(self.join(name)),
        };
        match made {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
            _ => Ok(()),
        }
    }

    /// Removes cgroup `name` if it is empty (the kernel refuses otherwise); errors ignored.
    fn rmdir(&self, name: &str) {
        let relative = self.fd.as_ref().map(|fd| rustix::fs::unlinkat(fd, name, AtFlags::REMOVEDIR));
        if !matches!(relative, Some(Ok(())) | Some(Err(rustix::io::Errno::BUSY))) {
            let _ = fs::remove_dir(self.join(name));
        }
    }

    /// Opens file `file` of cgroup `name` for writing.
    fn open_write(&self, name: &str, file: &str) -> io::Result<OwnedFd> {
        let flags = OFlags::WRONLY | OFlags::CLOEXEC;
        let relative =
            self.fd.as_ref().map(|fd| rustix::fs::openat(fd, format!("{name}/{file}"), flags, Mode::empty()));
        match relative {
            Some(Ok(f)) => Ok(f),
            Some(Err(e)) if e != rustix::io::Errno::NOENT => Err(e.into()),
            _ => Ok(OwnedFd::from(OpenOptions::new().write(true).open(self.join(name).join(file))?)),
        }
    }

    /// The attempt name of `dir` if `dir` is a cgroup directly below this base.
    fn name_of<'d>(&self, dir: &'d Path) -> Option<&'d str> {
        (dir.parent() == Some(self.path.as_path())).then(|| dir.file_name()?.to_str()).flatten()
    }
}

/// How one backend places its attempts: the folders under which each attempt gets a cgroup,
/// and what they give.
#[derive(Clone, Debug, Default)]
pub(crate) struct Placement {
    /// v2: `OWN/weir/TAG`, and whether cpu and memory limits can be set below it.
    v2: Option<(Base, bool)>,
    /// v1 limit hierarchies used (only those whose limit v2 cannot set): controller, folder.
    v1: Vec<(&'static str, Base)>,
    /// `weir/TAG`: how an attempt's cgroup path reads in `/proc/PID/cgroup`.
    tag: String,
    /// One line for the operator: what is in use, and what is missing.
    pub note: String,
    /// The slots this backend value made (shared by clones).
    pool: Arc<Mutex<Pool>>,
}

/// Most free slots kept; beyond that a forgotten attempt's slot is removed.
const MAX_FREE: usize = 128;
/// Most memory a freed slot may still have charged (after its page cache is reclaimed) and
/// be re-used: what a short task leaves is a few pages.
const LEFT_CHARGE: u64 = 1 << 20;
/// What an earlier weir named its emptied v1 cgroups kept for re-use (removed at start).
const SPARE_PREFIX: &str = "spare-";

/// The limits a slot carries: cpu quota (us per 100 ms period) and memory (bytes); `None` is
/// no limit (the kernel's default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Limits {
    cpu_quota_us: Option<u64>,
    memory_bytes: Option<u64>,
}

impl Limits {
    fn of(r: Resources) -> Limits {
        let set = |v: u64| v > 0 && v != u64::MAX;
        Limits {
            cpu_quota_us: set(r.cpu).then(|| r.cpu.saturating_mul(100)),
            memory_bytes: set(r.memory).then(|| r.memory.saturating_mul(1 << 20)),
        }
    }

    /// The v1 files of controller `ctl` to write to go from `have` (`None`: a new cgroup, at
    /// the kernel's defaults) to `self`.
    fn v1_writes(self, ctl: &str, have: Option<Limits>) -> Vec<(&'static str, String)> {
        let fresh = Limits { cpu_quota_us: None, memory_bytes: None };
        let have = have.unwrap_or(fresh);
        let value = |v: Option<u64>| v.map_or_else(|| "-1".to_string(), |v| v.to_string());
        // A new v1 cgroup's `cpu.cfs_period_us` is the kernel's default, 100,000 us (it is
        // not inherited): only the quota is written.
        match ctl {
            "cpu" if self.cpu_quota_us != have.cpu_quota_us => {
                vec![("cpu.cfs_quota_us", value(self.cpu_quota_us))]
            }
            "memory" if self.memory_bytes != have.memory_bytes => {
                vec![("memory.limit_in_bytes", value(self.memory_bytes))]
            }
            _ => Vec::new(),
        }
    }

    /// The same for a v2 cgroup whose `cpu` and `memory` controllers are enabled.
    fn v2_writes(self, have: Option<Limits>) -> Vec<(&'static str, String)> {
        let fresh = Limits { cpu_quota_us: None, memory_bytes: None };
        let have = have.unwrap_or(fresh);
        let mut w = Vec::new();
        if self.cpu_quota_us != have.cpu_quota_us {
            let q = self.cpu_quota_us.map_or_else(|| "max".to_string(), |q| q.to_string());
            w.push(("cpu.max", format!("{q} 100000")));
        }
        if self.memory_bytes != have.memory_bytes {
            w.push(("memory.max", self.memory_bytes.map_or_else(|| "max".to_string(), |m| m.to_string())));
        }
        w
    }
}

/// One attempt's place: a cgroup of the same name in every hierarchy used, with their
/// `cgroup.procs` kept open (the child joins through them) and the limits they carry.
#[derive(Debug)]
struct Slot {
    name: String,
    procs: Arc<Vec<OwnedFd>>,
    limits: Limits,
}

/// The slots of one backend value. A slot's name (`PREFIX-N`, the prefix unique to this
/// backend value: process id, start time, a counter) is never made by another backend value,
/// so a record of an attempt from before a restart can never name a slot in use now. Within
/// this backend value a slot goes back to `free` only once its attempt's end is stored and the
/// attempt is forgotten ([`Placement::forget`]); until then its record may still be handled
/// (adopt, kill, forget), and every such call checks the slot's owner first.
#[derive(Debug, Default)]
struct Pool {
    prefix: String,
    next: u64,
    free: Vec<Slot>,
    /// Slots of attempts not forgotten yet, by slot name: the owner (attempt id), whether its
    /// end found it empty, the slot.
    owned: HashMap<String, (String, bool, Slot)>,
}

/// What this backend may do with cgroup folders a record names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// A slot of this backend value that belongs to the attempt asking: signal it, leave its
    /// removal to [`Placement::forget`].
    This,
    /// A slot of this backend value now free or another attempt's: touch nothing.
    Other,
    /// Not a slot of this backend value (an earlier server's, or from before slots): it names
    /// only that attempt; signal it and remove it.
    Foreign,
}

static INCARNATIONS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl Placement {
    /// Sets up `OWN/weir/TAG` in every usable hierarchy. Never fails: what cannot be set up is
    /// left out and said in [`Placement::note`].
    pub(crate) fn new(h: &Hierarchies, tag: &str) -> Placement {
        let mut p = Placement::default();
        let mut missing = Vec::new();
        match &h.v2 {
            Some(own) => {
                let base = own.join("weir").join(tag);
                match fs::create_dir_all(&base) {
                    Ok(()) if base.join("cgroup.kill").exists() => {
                        let limits = enable_controllers(own, &base);
                        p.v2 = Some((Base::new(base), limits));
                    }
                    Ok(()) => missing.push("cgroup v2 without cgroup.kill (Linux < 5.14)".to_string()),
                    Err(e) => missing.push(format!("cgroup v2 at {}: {e}", base.display())),
                }
            }
            None => missing.push("no cgroup v2 hierarchy".to_string()),
        }
        let v2_limits = matches!(p.v2, Some((_, true)));
        if !v2_limits {
            for ctl in LIMIT_CONTROLLERS {
                let Some(own) = h.v1.get(ctl) else {
                    missing.push(format!("no {ctl} controller (v2 or v1)"));
                    continue;
                };
                let base = own.join("weir").join(tag);
                match fs::create_dir_all(&base) {
                    Ok(()) => p.v1.push((ctl, Base::new(base))),
                    Err(e) => missing.push(format!("cgroup v1 {ctl} at {}: {e}", base.display())),
                }
            }
        }
        // What earlier servers of this state folder left (a server killed before its backend
        // went: its free slots, the slots of attempts that ended unwatched, an earlier weir's
        // per-attempt cgroups and v1 spares): removed, each empty one.
        for base in p.bases() {
            remove_dead(&base.path);
        }
        p.tag = format!("weir/{tag}");
        let n = INCARNATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        p.pool = Arc::new(Mutex::new(Pool {
            prefix: format!("slot.{:x}.{ms:x}.{n}-", std::process::id()),
            ..Pool::default()
        }));
        let mut using = Vec::new();
        if let Some((base, limits)) = &p.v2 {
            let what = if *limits { "kill, cpu.max, memory.max" } else { "kill" };
            using.push(format!("cgroup v2 ({what}) under {}", base.path.display()));
        }
        for (ctl, base) in &p.v1 {
            using.push(format!("cgroup v1 {ctl} under {}", base.path.display()));
        }
        p.note = match (using.is_empty(), missing.is_empty()) {
            (true, _) => format!(
                "tasks are NOT in cgroups ({}): a kill reaches the task's process group only (a \
                 child that called setsid survives it) and cpu/memory are not limited",
                missing.join("; ")
            ),
            (false, true) => format!("tasks run in their own cgroups: {}", using.join("; ")),
            (false, false) => {
                format!(
                    "tasks run in their own cgroups: {}; not available: {}",
                    using.join("; "),
                    missing.join("; ")
                )
            }
        };
        p
    }

    fn pool(&self) -> std::sync::MutexGuard<'_, Pool> {
        // Every change under this lock is a single insert, remove or push: consistent after a
        // panic too.
        self.pool.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn bases(&self) -> impl Iterator<Item = &Base> {
        self.v2.iter().map(|(b, _)| b).chain(self.v1.iter().map(|(_, b)| b))
    }

    /// The folders of cgroup `name` in every hierarchy used (v2 first).
    fn dirs(&self, name: &str) -> Vec<PathBuf> {
        self.bases().map(|b| b.join(name)).collect()
    }

    /// The cgroups of this backend that process `pid` is in or about to join (a child between
    /// its clone and its exec holds their `cgroup.procs` open), for an attempt found without
    /// its record. Its descriptors are read first: a child that execs meanwhile has joined.
    pub(crate) fn of_process(&self, pid: i32) -> Vec<PathBuf> {
        let mut names: Vec<String> = Vec::new();
        if let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) {
            for fd in fds.flatten() {
                let Ok(target) = fs::read_link(fd.path()) else { continue };
                if target.file_name().is_none_or(|f| f != "cgroup.procs") {
                    continue;
                }
                let Some(dir) = target.parent() else { continue };
                if let Some(name) = self.bases().find_map(|b| b.name_of(dir)) {
                    names.push(name.to_string());
                }
            }
        }
        let own = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        for line in own.lines() {
            let Some(path) = line.splitn(3, ':').nth(2) else { continue };
            let Some((parent, name)) = path.rsplit_once('/') else { continue };
            if parent.ends_with(&format!("/{}", self.tag)) || parent == format!("/{}", self.tag) {
                names.push(name.to_string());
            }
        }
        names.sort();
        names.dedup();
        names.iter().flat_map(|n| self.dirs(n)).filter(|d| d.is_dir()).collect()
    }

    /// Removes this backend's free slots and then its `weir/TAG` folders if no attempt's
    /// cgroup is left in them (the kernel refuses to remove a cgroup with children: running
    /// attempts keep theirs).
    pub(crate) fn remove_if_unused(&self) {
        // Free slots, and those of ended attempts not forgotten yet (empty too: a later
        // server's `forget` of their records finds them gone). Left behind, every empty v1
        // `cpu` cgroup makes each later quota write dearer (the kernel checks the bandwidth
        // over the whole `cpu` tree).
        let emptied: Vec<String> = {
            let mut pool = self.pool();
            let mut names: Vec<String> = pool.free.drain(..).map(|s| s.name).collect();
            let ended: Vec<String> =
                pool.owned.iter().filter(|(_, (_, ended, _))| *ended).map(|(n, _)| n.clone()).collect();
            for n in &ended {
                pool.owned.remove(n);
            }
            names.extend(ended);
            names
        };
        for name in &emptied {
            for base in self.bases() {
                base.rmdir(name);
            }
        }
        for (_, base) in &self.v1 {
            remove_spares(&base.path);
        }
        remove(&self.bases().map(|b| b.path.clone()).collect::<Vec<_>>());
    }

    /// No cgroups, for the reason given.
    pub(crate) fn none(note: &str) -> Placement {
        Placement { note: note.to_string(), ..Placement::default() }
    }

    /// Whether attempts get any cgroup.
    pub(crate) fn is_empty(&self) -> bool {
        self.v2.is_none() && self.v1.is_empty()
    }

    /// A slot for `attempt` with `resources` as its limits: a free one (its limits rewritten
    /// where they differ) or a new one. Returns its folders (for the launch record) and its
    /// open `cgroup.procs` files for the child to join (none of them on 0, 1 or 2).
    pub(crate) fn create(
        &self,
        attempt: &str,
        resources: Resources,
    ) -> io::Result<(Vec<PathBuf>, Arc<Vec<OwnedFd>>)> {
        let want = Limits::of(resources);
        // The last freed first: its cgroup files are the most likely still in the caches.
        let free = self.pool().free.pop();
        let reused = free.and_then(|mut slot| match self.write_limits(&slot.name, want, Some(slot.limits)) {
            Ok(()) => {
                slot.limits = want;
                Some(slot)
            }
            Err(_) => {
                // Limits it may now half carry (or one the kernel refused): not used again,
                // and the attempt gets a new slot instead.
                self.remove_slot(slot);
                None
            }
        });
        let slot = match reused {
            Some(slot) => slot,
            None => {
                let name = {
                    let mut pool = self.pool();
                    let name = format!("{}{}", pool.prefix, pool.next);
                    pool.next += 1;
                    name
                };
                match self.make_slot(&name, want) {
                    Ok(slot) => slot,
                    Err(e) => {
                        for base in self.bases() {
                            base.rmdir(&name);
                        }
                        return Err(e);
                    }
                }
            }
        };
        let dirs = self.dirs(&slot.name);
        let procs = Arc::clone(&slot.procs);
        self.pool().owned.insert(slot.name.clone(), (attempt.to_string(), false, slot));
        Ok((dirs, procs))
    }

    /// Closes slot `slot`'s files and removes its cgroups (empty ones only).
    fn remove_slot(&self, slot: Slot) {
        drop(slot.procs);
        for base in self.bases() {
            base.rmdir(&slot.name);
        }
    }

    /// Whether slot `name` holds (almost) no memory charged by its last attempt, so the next
    /// attempt, maybe another tenant's, gets all the memory it was granted. Pages an attempt
    /// leaves charged to its cgroup (files in a tmpfs such as `/dev/shm`, its page cache) stay
    /// charged after its processes end: in a re-used slot they would count against the next
    /// attempt's limit, or make the kernel refuse that limit (it cannot lower a limit below
    /// what it cannot reclaim). Page cache is reclaimed first (v1 `memory.force_empty`, v2
    /// `memory.reclaim`); a slot still charged is removed (the kernel moves the charge to the
    /// parent) instead of re-used. Without a memory controller there is nothing to check.
    fn uncharged(&self, name: &str) -> bool {
        let (base, usage, reclaim) = match (&self.v2, self.v1.iter().find(|(ctl, _)| *ctl == "memory")) {
            (Some((base, true)), _) => (base, "memory.current", "memory.reclaim"),
            (_, Some((_, base))) => (base, "memory.usage_in_bytes", "memory.force_empty"),
            _ => return true,
        };
        let dir = base.join(name);
        let charged = || fs::read_to_string(dir.join(usage)).ok().and_then(|s| s.trim().parse::<u64>().ok());
        match charged() {
            Some(n) if n <= LEFT_CHARGE => return true,
            Some(n) => {
                let value = if reclaim == "memory.reclaim" { n.to_string() } else { "0".to_string() };
                let _ = write_file(&dir.join(reclaim), &value);
            }
            None => return false,
        }
        charged().is_some_and(|n| n <= LEFT_CHARGE)
    }

    fn make_slot(&self, name: &str, limits: Limits) -> io::Result<Slot> {
        for base in self.bases() {
            base.mkdir(name)?;
        }
        self.write_limits(name, limits, None)?;
        let mut procs = Vec::new();
        for base in self.bases() {
            let fd = base.open_write(name, "cgroup.procs")?;
            // The child puts the standard descriptors on 0, 1 and 2 before it joins: a
            // cgroup file there (a server started with a standard descriptor closed) moves
            // above them first.
            let fd = if std::os::fd::AsRawFd::as_raw_fd(&fd) > 2 {
                fd
            } else {
                rustix::io::fcntl_dupfd_cloexec(&fd, 3)?
            };
            procs.push(fd);
        }
        Ok(Slot { name: name.to_string(), procs: Arc::new(procs), limits })
    }

    /// Writes the limit files of slot `name` that differ from `have` (`None`: a new cgroup).
    fn write_limits(&self, name: &str, want: Limits, have: Option<Limits>) -> io::Result<()> {
        if let Some((base, true)) = &self.v2 {
            write_all(base, name, &want.v2_writes(have))?;
        }
        for (ctl, base) in &self.v1 {
            write_all(base, name, &want.v1_writes(ctl, have))?;
        }
        Ok(())
    }

    /// A start that failed before anything could run in slot `dirs` (its child, if any, has
    /// exited and was reaped): the slot is free again at once, since no record names it.
    pub(crate) fn unused(&self, attempt: &str, dirs: &[PathBuf]) {
        let Some(name) = self.slot_name(dirs) else { return };
        let mut pool = self.pool();
        if pool.owned.get(&name).is_some_and(|(owner, _, _)| owner == attempt) {
            if let Some((_, _, slot)) = pool.owned.remove(&name) {
                pool.free.push(slot);
            }
        }
    }

    /// The slot name of an attempt's cgroup folders (the last component of the first).
    fn slot_name(&self, dirs: &[PathBuf]) -> Option<String> {
        dirs.first().and_then(|d| d.file_name()).map(|n| n.to_string_lossy().into_owned())
    }

    /// What `attempt` may do with the cgroup folders `dirs` its record names.
    pub(crate) fn owner(&self, attempt: &str, dirs: &[PathBuf]) -> Owner {
        let Some(name) = self.slot_name(dirs) else { return Owner::Foreign };
        let pool = self.pool();
        match pool.owned.get(&name) {
            Some((owner, _, _)) if owner == attempt => Owner::This,
            _ if name.starts_with(&pool.prefix) => Owner::Other,
            _ => Owner::Foreign,
        }
    }

    /// Sends `signal` to everything in the cgroups `dirs` of `attempt`'s record ([`signal_all`])
    /// unless they are a slot of this backend it does not own (any more); whether it did. The
    /// pool stays locked meanwhile, so the slot cannot change hands half-way.
    pub(crate) fn signal(&self, attempt: &str, dirs: &[PathBuf], signal: Signal) -> bool {
        let Some(name) = self.slot_name(dirs) else { return true };
        let pool = self.pool();
        let other = match pool.owned.get(&name) {
            Some((owner, _, _)) => owner != attempt,
            None => name.starts_with(&pool.prefix),
        };
        if !other {
            signal_all(dirs, signal);
        }
        !other
    }

    /// An attempt's end found its cgroups empty: its slot waits for [`Placement::forget`]
    /// (the end is not stored yet, and the record can still be handled until then). Cgroups
    /// that are not a slot of this backend are removed.
    pub(crate) fn release(&self, attempt: &str, dirs: &[PathBuf]) {
        match self.owner(attempt, dirs) {
            Owner::This => {
                if let Some(name) = self.slot_name(dirs) {
                    if let Some(entry) = self.pool().owned.get_mut(&name) {
                        entry.1 = true;
                    }
                }
            }
            Owner::Other => {}
            Owner::Foreign => self.remove_dirs(dirs),
        }
    }

    /// The attempt's end is stored (or its cgroups could not be emptied): its slot goes back to
    /// the free ones if its end found it empty and there is room, else it is removed (empty
    /// cgroups only; the kernel refuses the others) and never used again. Cgroups that are not
    /// a slot of this backend are removed; another attempt's slot is left alone.
    pub(crate) fn forget(&self, attempt: &str, dirs: &[PathBuf]) {
        match self.owner(attempt, dirs) {
            Owner::This => {
                let Some(name) = self.slot_name(dirs) else { return };
                let Some((_, emptied, slot)) = self.pool().owned.remove(&name) else { return };
                let slot = if emptied && self.uncharged(&slot.name) {
                    let mut pool = self.pool();
                    if pool.free.len() < MAX_FREE {
                        pool.free.push(slot);
                        return;
                    }
                    slot
                } else {
                    slot
                };
                self.remove_slot(slot);
            }
            Owner::Other => {}
            Owner::Foreign => self.remove_dirs(dirs),
        }
    }

    /// `rmdir` of each folder, relative to its base's descriptor when it is one of ours.
    fn remove_dirs(&self, dirs: &[PathBuf]) {
        for dir in dirs {
            match self.bases().find_map(|b| Some((b, b.name_of(dir)?))) {
                Some((base, name)) => base.rmdir(name),
                None => {
                    let _ = fs::remove_dir(dir);
                }
            }
        }
    }
}

/// Writes `limits` into the files of cgroup `name` below `base`.
fn write_all(base: &Base, name: &str, limits: &[(&str, String)]) -> io::Result<()> {
    for (file, value) in limits {
        fs::File::from(base.open_write(name, file)?).write_all(value.as_bytes())?;
    }
    Ok(())
}

/// Removes the spare cgroups under `base` (they hold no process).
fn remove_spares(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else { return };
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with(SPARE_PREFIX) {
            let _ = fs::remove_dir(e.path());
        }
    }
}

/// Removes the cgroups below `base` that no live process may use: slots whose backend's
/// process is gone (`slot.PID.…`: a slot of a live process, another backend of this state
/// folder or this one's, is kept) and cgroups of any other name (an earlier weir's per-attempt
/// cgroups and spares). Only empty ones go: the kernel refuses to remove a cgroup that holds a
/// process, so an attempt still running (adopted after a restart) keeps its cgroup, which its
/// record names, until that record is forgotten.
fn remove_dead(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else { return };
    for e in entries.flatten() {
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let name = e.file_name();
        let name = name.to_string_lossy();
        if let Some(rest) = name.strip_prefix("slot.") {
            let pid = rest.split('.').next().and_then(|p| u32::from_str_radix(p, 16).ok());
            match pid {
                Some(pid) if Path::new(&format!("/proc/{pid}")).exists() => continue,
                Some(_) => {}
                None => continue,
            }
        }
        let _ = fs::remove_dir(e.path());
    }
}

/// Enables `cpu` and `memory` for the subtree from `own` down to `base`. False when the
/// controllers are not offered or cannot be enabled (a non-root cgroup that holds processes
/// cannot delegate controllers: cgroup v2's "no internal processes" rule).
fn enable_controllers(own: &Path, base: &Path) -> bool {
    let Ok(rel) = base.strip_prefix(own) else { return false };
    let mut dir = own.to_path_buf();
    let mut levels = vec![dir.clone()];
    for c in rel.components() {
        dir = dir.join(c);
        levels.push(dir.clone());
    }
    // Each level enables them for its children: `own` for `weir`, …, `base` for attempts.
    for level in &levels {
        let offered = fs::read_to_string(level.join("cgroup.controllers")).unwrap_or_default();
        if !LIMIT_CONTROLLERS.iter().all(|c| offered.split_whitespace().any(|o| o == *c)) {
            return false;
        }
        let enabled = fs::read_to_string(level.join("cgroup.subtree_control")).unwrap_or_default();
        if LIMIT_CONTROLLERS.iter().all(|c| enabled.split_whitespace().any(|o| o == *c)) {
            continue;
        }
        if write_file(&level.join("cgroup.subtree_control"), "+cpu +memory").is_err() {
            return false;
        }
    }
    true
}

fn write_file(path: &Path, value: &str) -> io::Result<()> {
    let mut f = OpenOptions::new().write(true).open(path)?;
    f.write_all(value.as_bytes())
}

/// The processes in a cgroup now (empty when it is gone).
pub(crate) fn members(dir: &Path) -> Vec<i32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// The attempt's cgroups that hold all of its processes: its v2 cgroup alone when it has one
/// (every process of the attempt is in it, and a task cannot leave it), else every v1 one.
/// Checking and signalling one folder instead of three is a good part of an attempt's end.
fn covering(dirs: &[PathBuf]) -> &[PathBuf] {
    let v2 = Hierarchies::get().v2.as_deref();
    match dirs.iter().position(|d| v2.is_some_and(|own| d.starts_with(own))) {
        Some(i) => &dirs[i..=i],
        None => dirs,
    }
}

/// Sends `signal` to everything in the attempt's cgroups: SIGKILL through `cgroup.kill`
/// where v2 has it (atomic: a process forking meanwhile cannot escape), else to each member.
pub(crate) fn signal_all(dirs: &[PathBuf], signal: Signal) {
    for dir in covering(dirs) {
        if signal == Signal::KILL && write_file(&dir.join("cgroup.kill"), "1").is_ok() {
            continue;
        }
        for pid in members(dir) {
            if let Some(pid) = Pid::from_raw(pid) {
                let _ = kill_process(pid, signal);
            }
        }
    }
}

/// Whether nothing runs in the attempt's cgroups any more.
pub(crate) fn all_empty(dirs: &[PathBuf]) -> bool {
    covering(dirs).iter().all(|d| members(d).is_empty())
}

/// Removes the attempt's cgroups (empty ones only; the kernel refuses the others).
pub(crate) fn remove(dirs: &[PathBuf]) {
    for dir in dirs {
        let _ = fs::remove_dir(dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_folder_removed_under_the_backend_is_made_again() {
        // Base works on any folder (cgroupfs only adds the files): a plain temporary one here.
        let root = std::env::temp_dir().join(format!("weir-cgroup-base-{}", std::process::id()));
        let path = root.join("weir").join("tag");
        fs::create_dir_all(&path).unwrap();
        let base = Base::new(path.clone());
        assert!(base.fd.is_some());
        base.mkdir("a").unwrap();
        base.mkdir("a").unwrap(); // left by a crashed start: fine
        fs::write(path.join("a").join("cgroup.procs"), "").unwrap();
        base.open_write("a", "cgroup.procs").unwrap();
        base.rmdir("a"); // not empty: refused, kept
        assert!(path.join("a").is_dir());
        fs::remove_dir_all(&root).unwrap();
        // Removed under it: its descriptor is stale; paths take over.
        base.mkdir("b").unwrap();
        assert!(path.join("b").is_dir());
        fs::write(path.join("b").join("cgroup.procs"), "").unwrap();
        base.open_write("b", "cgroup.procs").unwrap();
        fs::remove_file(path.join("b").join("cgroup.procs")).unwrap();
        base.rmdir("b");
        assert!(!path.join("b").exists());
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_dead_servers_empty_cgroups_are_removed_and_live_or_occupied_ones_kept() {
        // A plain folder stands for cgroupfs: a folder holding a file is refused by `rmdir`
        // as a cgroup holding a process is.
        let base = std::env::temp_dir().join(format!("weir-cgroup-sweep-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        fs::create_dir_all(&base).unwrap();
        let live = format!("slot.{:x}.19c0.0-4", std::process::id());
        let dead = "slot.7fffffff.19c0.0-1"; // above any pid_max
        let dead_busy = "slot.7fffffff.19c0.0-2";
        let odd = "slot.not-hex.1-1";
        for d in [live.as_str(), dead, dead_busy, odd, "run-3-t0-a1", "run-4-t0-a1", "spare-9"] {
            fs::create_dir(base.join(d)).unwrap();
        }
        fs::write(base.join(dead_busy).join("cgroup.procs"), "4242\n").unwrap();
        fs::write(base.join("run-4-t0-a1").join("cgroup.procs"), "4243\n").unwrap();
        fs::write(base.join("not-a-folder"), "").unwrap();
        remove_dead(&base);
        let mut left: Vec<String> = fs::read_dir(&base)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut want = vec![
            live.clone(),
            dead_busy.to_string(),
            odd.to_string(),
            "not-a-folder".into(),
            "run-4-t0-a1".into(),
        ];
        want.sort();
        assert_eq!(left, want);
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_reused_cgroup_gets_only_the_limits_that_differ_and_a_lifted_one_is_reset() {
        let r = |cpu, memory| Limits::of(Resources::new(cpu, memory, 0));
        // A new cgroup is at the kernel's defaults: only set limits are written.
        assert_eq!(r(1500, 2048).v1_writes("cpu", None), vec![("cpu.cfs_quota_us", "150000".to_string())]);
        assert_eq!(
            r(1500, 2048).v1_writes("memory", None),
            vec![("memory.limit_in_bytes", (2048u64 << 20).to_string())]
        );
        assert!(r(0, 0).v1_writes("cpu", None).is_empty());
        // A re-used slot: the same limits need no write; others are rewritten; none is "-1".
        let have = Some(r(1500, 2048));
        assert!(r(1500, 2048).v1_writes("cpu", have).is_empty());
        assert!(r(1500, 2048).v1_writes("memory", have).is_empty());
        assert_eq!(r(500, 2048).v1_writes("cpu", have), vec![("cpu.cfs_quota_us", "50000".to_string())]);
        assert_eq!(r(0, 0).v1_writes("cpu", have), vec![("cpu.cfs_quota_us", "-1".to_string())]);
        assert_eq!(r(0, 0).v1_writes("memory", have), vec![("memory.limit_in_bytes", "-1".to_string())]);
        // v2: the same, with `max` for no limit.
        assert_eq!(
            r(1500, 2048).v2_writes(None),
            vec![("cpu.max", "150000 100000".to_string()), ("memory.max", (2048u64 << 20).to_string())]
        );
        assert!(r(0, 0).v2_writes(None).is_empty());
        assert!(r(1500, 2048).v2_writes(have).is_empty());
        assert_eq!(
            r(0, 0).v2_writes(have),
            vec![("cpu.max", "max 100000".to_string()), ("memory.max", "max".to_string())]
        );
    }

    #[test]
    fn hybrid_and_unified_machines_are_read() {
        let mountinfo = "\
30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
31 25 0:27 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
32 25 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct
33 25 0:29 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids";
        let own = "0::/svc\n4:memory:/box/1\n3:cpu,cpuacct:/\n2:pids:/\n";
        let h = Hierarchies::parse(mountinfo, own);
        assert_eq!(h.v2, Some(PathBuf::from("/sys/fs/cgroup/unified/svc")));
        assert_eq!(h.v1.get("memory"), Some(&PathBuf::from("/sys/fs/cgroup/memory/box/1")));
        assert_eq!(h.v1.get("cpu"), Some(&PathBuf::from("/sys/fs/cgroup/cpu,cpuacct")));
        assert_eq!(h.v1.len(), 2);

        let unified = "40 1 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate";
        let h = Hierarchies::parse(unified, "0::/system.slice/weir.service\n");
        assert_eq!(h.v2, Some(PathBuf::from("/sys/fs/cgroup/system.slice/weir.service")));
        assert!(h.v1.is_empty());

        // A container that sees its own cgroup as the mount's root.
        let ns = "50 1 0:31 /ctr /sys/fs/cgroup rw - cgroup2 cgroup2 rw";
        let h = Hierarchies::parse(ns, "0::/ctr/inner\n");
        assert_eq!(h.v2, Some(PathBuf::from("/sys/fs/cgroup/inner")));
    }
}
