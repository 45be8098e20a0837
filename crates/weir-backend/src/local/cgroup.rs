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
//! `OWN/weir/TAG/ATTEMPT`, TAG naming the backend's state folder (two servers on one machine,
//! or one server's several clusters, never share a folder).
//!
//! Emptied v1 cgroups are kept for later attempts ([`Spares`]): making and removing a v1
//! `memory` and `cpu` cgroup (per-cpu statistics, scheduler entities, the bandwidth check over
//! every cpu cgroup) was the largest cost of an isolated start on hybrid machines. A spare is
//! renamed (`spare-N` to the attempt's name and back), so a cgroup's path still names one
//! attempt only: a stale launch record's cleanup can never reach a later attempt's processes.
//! cgroup v2 cannot rename, and its cgroup (with no controllers on hybrid machines) is cheap to
//! make: it is made and removed per attempt.
//!
//! A task joins its cgroups between clone and exec (it writes `0` to the `cgroup.procs` files
//! the backend opened before the clone, with the backend's credentials), so it never runs a single
//! instruction outside them and has no process to fork before it is contained. The files are
//! the backend's (root's): a task cannot move itself out.

use std::collections::{BTreeMap, HashMap, HashSet};
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
/// renamed and removed relative to it (`mkdirat`, `openat`, …), so each call walks one or two
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

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        match self.fd.as_ref().map(|fd| rustix::fs::renameat(fd, from, fd, to)) {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) if e != rustix::io::Errno::NOENT => Err(e.into()),
            _ => fs::rename(self.join(from), self.join(to)),
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
    /// One line for the operator: what is in use, and what is missing.
    pub note: String,
    /// Emptied v1 cgroups kept for the next attempts (shared by clones).
    spares: Arc<Mutex<Spares>>,
}

/// Most spare v1 cgroup sets kept; beyond that an emptied attempt's cgroups are removed.
const MAX_SPARES: usize = 64;
const SPARE_PREFIX: &str = "spare-";

/// The v1 limits an attempt's cgroups carry: cpu quota (us per 100 ms period) and memory
/// (bytes); `None` is no limit (the kernel's default).
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
}

/// Spare v1 cgroup sets and the limits of the live ones this backend made.
#[derive(Debug, Default)]
struct Spares {
    next: u64,
    /// Each spare is `BASE/spare-N` in every v1 hierarchy used, with the limits it carries.
    free: Vec<(u64, Limits)>,
    /// The limits of each live attempt's v1 cgroups, by attempt name (made by this process).
    live: HashMap<String, Limits>,
    /// Attempts whose cgroups this process already released (kept as spares or removed):
    /// their `forget` has nothing left to remove (three failing `rmdir`s per task before).
    released: HashSet<String>,
}

/// Most released attempts remembered until their `forget`; beyond that the set is cleared
/// (a forget then tries the `rmdir`s, which fail harmlessly).
const MAX_RELEASED: usize = 1 << 16;

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
        // Spares of an earlier server are empty folders of unknown limits: removed.
        for (_, base) in &p.v1 {
            remove_spares(&base.path);
        }
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

    /// The cgroups of attempt `name` that exist now (for an attempt found without its record).
    pub(crate) fn existing(&self, name: &str) -> Vec<PathBuf> {
        let v2 = self.v2.iter().map(|(base, _)| base.join(name));
        let v1 = self.v1.iter().map(|(_, base)| base.join(name));
        v2.chain(v1).filter(|d| d.is_dir()).collect()
    }

    /// Removes this backend's `weir/TAG` folders if no attempt's cgroup is left in them (the
    /// kernel refuses to remove a cgroup with children: running attempts keep theirs).
    pub(crate) fn remove_if_unused(&self) {
        if let Ok(mut spares) = self.spares.lock() {
            spares.free.clear();
        }
        for (_, base) in &self.v1 {
            remove_spares(&base.path);
        }
        let v2 = self.v2.iter().map(|(base, _)| base.path.clone());
        let v1 = self.v1.iter().map(|(_, base)| base.path.clone());
        remove(&v2.chain(v1).collect::<Vec<_>>());
    }

    /// No cgroups, for the reason given.
    pub(crate) fn none(note: &str) -> Placement {
        Placement { note: note.to_string(), ..Placement::default() }
    }

    /// Whether attempts get any cgroup.
    pub(crate) fn is_empty(&self) -> bool {
        self.v2.is_none() && self.v1.is_empty()
    }

    /// Makes attempt `name`'s cgroups with `resources` as limits and opens their
    /// `cgroup.procs` for the child to join. Returns the folders (for the launch record) and
    /// the open files. The v1 ones are a spare set renamed when there is one; a cgroup left by
    /// a start that crashed is re-used.
    pub(crate) fn create(
        &self,
        name: &str,
        resources: Resources,
    ) -> io::Result<(Vec<PathBuf>, Vec<OwnedFd>)> {
        let mut dirs = Vec::new();
        let mut files = Vec::new();
        let want = Limits::of(resources);
        if let Some((base, limits)) = &self.v2 {
            let mut l = Vec::new();
            if *limits {
                if let Some(q) = want.cpu_quota_us {
                    l.push(("cpu.max", format!("{q} 100000")));
                }
                if let Some(m) = want.memory_bytes {
                    l.push(("memory.max", m.to_string()));
                }
            }
            base.mkdir(name)?;
            dirs.push(base.join(name));
            open_with_limits(base, name, &l, &mut files)?;
        }
        if self.v1.is_empty() {
            return Ok((dirs, files));
        }
        let spare = self.spares.lock().ok().and_then(|mut s| s.free.pop());
        let have = match spare {
            Some((n, have)) if self.rename_v1(&format!("{SPARE_PREFIX}{n}"), name) => Some(have),
            Some((n, _)) => {
                // Gone or in the way (a cgroup of this name left by a crashed start): both
                // names are dropped where empty, and the attempt's cgroups are made afresh.
                for (_, base) in &self.v1 {
                    base.rmdir(&format!("{SPARE_PREFIX}{n}"));
                }
                None
            }
            None => None,
        };
        for (ctl, base) in &self.v1 {
            if have.is_none() {
                base.mkdir(name)?;
            }
            dirs.push(base.join(name));
            open_with_limits(base, name, &want.v1_writes(ctl, have), &mut files)?;
        }
        if let Ok(mut s) = self.spares.lock() {
            s.live.insert(name.to_string(), want);
        }
        Ok((dirs, files))
    }

    /// Renames `from` to `to` in every v1 hierarchy used; on a failure, renames back what was
    /// renamed and returns false.
    fn rename_v1(&self, from: &str, to: &str) -> bool {
        for (i, (_, base)) in self.v1.iter().enumerate() {
            if base.rename(from, to).is_err() {
                for (_, done) in &self.v1[..i] {
                    let _ = done.rename(to, from);
                }
                return false;
            }
        }
        true
    }

    /// An attempt's cgroups once nothing runs in them: the v1 set becomes a spare (renamed
    /// `spare-N`) when this process made it and there is room; everything else is removed.
    pub(crate) fn release(&self, dirs: &[PathBuf]) {
        let name = dirs.first().and_then(|d| d.file_name()).map(|n| n.to_string_lossy().into_owned());
        if let (Some(name), Ok(mut s)) = (&name, self.spares.lock()) {
            if s.released.len() >= MAX_RELEASED {
                s.released.clear();
            }
            s.released.insert(name.clone());
        }
        let ours = |name: &str| {
            !self.v1.is_empty() && self.v1.iter().all(|(_, base)| dirs.contains(&base.join(name)))
        };
        let kept = name.filter(|n| ours(n)).and_then(|name| {
            let mut s = self.spares.lock().ok()?;
            let limits = s.live.remove(&name)?;
            if s.free.len() >= MAX_SPARES {
                return None;
            }
            let n = s.next;
            s.next += 1;
            Some((name, n, limits))
        });
        let Some((name, n, limits)) = kept else {
            self.remove_dirs(dirs);
            return;
        };
        // The v2 cgroup (or anything else) goes; the v1 set is kept.
        let v1: Vec<PathBuf> = self.v1.iter().map(|(_, base)| base.join(&name)).collect();
        self.remove_dirs(&dirs.iter().filter(|d| !v1.contains(d)).cloned().collect::<Vec<_>>());
        if self.rename_v1(&name, &format!("{SPARE_PREFIX}{n}")) {
            if let Ok(mut s) = self.spares.lock() {
                s.free.push((n, limits));
            }
        } else {
            self.remove_dirs(&v1);
        }
    }

    /// Removes an attempt's cgroups (empty ones only; the kernel refuses the others) and forgets
    /// their limits. Nothing to do for an attempt whose cgroups this process already released.
    pub(crate) fn remove(&self, dirs: &[PathBuf]) {
        if let Some(name) = dirs.first().and_then(|d| d.file_name()) {
            if let Ok(mut s) = self.spares.lock() {
                let name = name.to_string_lossy();
                s.live.remove(name.as_ref());
                if s.released.remove(name.as_ref()) {
                    return;
                }
            }
        }
        self.remove_dirs(dirs);
    }

    /// `rmdir` of each folder, relative to its base's descriptor when it is one of ours.
    fn remove_dirs(&self, dirs: &[PathBuf]) {
        let bases = self.v2.iter().map(|(b, _)| b).chain(self.v1.iter().map(|(_, b)| b));
        let bases: Vec<&Base> = bases.collect();
        for dir in dirs {
            match bases.iter().find_map(|b| Some((b, b.name_of(dir)?))) {
                Some((base, name)) => base.rmdir(name),
                None => {
                    let _ = fs::remove_dir(dir);
                }
            }
        }
    }
}

/// Writes `limits` into cgroup `name` below `base` and opens its `cgroup.procs` (into `files`).
fn open_with_limits(
    base: &Base,
    name: &str,
    limits: &[(&str, String)],
    files: &mut Vec<OwnedFd>,
) -> io::Result<()> {
    for (file, value) in limits {
        fs::File::from(base.open_write(name, file)?).write_all(value.as_bytes())?;
    }
    files.push(base.open_write(name, "cgroup.procs")?);
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
        base.rename("a", "spare-0").unwrap();
        base.rmdir("spare-0"); // not empty: refused, kept
        assert!(path.join("spare-0").is_dir());
        fs::remove_dir_all(&root).unwrap();
        // Removed under it: its descriptor is stale; paths take over.
        base.mkdir("b").unwrap();
        assert!(path.join("b").is_dir());
        fs::write(path.join("b").join("cgroup.procs"), "").unwrap();
        base.open_write("b", "cgroup.procs").unwrap();
        base.rename("b", "c").unwrap();
        fs::remove_file(path.join("c").join("cgroup.procs")).unwrap();
        base.rmdir("c");
        assert!(!path.join("c").exists());
        fs::remove_dir_all(&root).unwrap();
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
        // A spare: the same limits need no write; others are rewritten; none is "-1".
        let have = Some(r(1500, 2048));
        assert!(r(1500, 2048).v1_writes("cpu", have).is_empty());
        assert!(r(1500, 2048).v1_writes("memory", have).is_empty());
        assert_eq!(r(500, 2048).v1_writes("cpu", have), vec![("cpu.cfs_quota_us", "50000".to_string())]);
        assert_eq!(r(0, 0).v1_writes("cpu", have), vec![("cpu.cfs_quota_us", "-1".to_string())]);
        assert_eq!(r(0, 0).v1_writes("memory", have), vec![("memory.limit_in_bytes", "-1".to_string())]);
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
