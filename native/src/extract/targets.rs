//! Targets: everything that touches the destination. Directory-relative opens (`O_NOFOLLOW`
//! at every component, so nothing is written outside it), the files being written — unnamed
//! (`O_TMPFILE` in the target's directory, given the final name by `linkat` once complete: a
//! SIGKILL leaves nothing named) or, where the file system or the process cannot, the
//! temporaries `.NAME.znippy-part-PID` and their rename (or hard link) under the final name —,
//! the POSIX facts (mode, mtime) set on the descriptor before, the targets' check before an
//! extract and the sweep of killed extracts' temporaries.

use super::*;
use std::sync::atomic::AtomicU8;

/// How a written file gets its final name; [`open_root`] resets it for each extract.
static NAMING: AtomicU8 = AtomicU8::new(UNTRIED);
/// the first file tells (see [`Job::probe`])
const UNTRIED: u8 = 0;
/// unnamed, `linkat(fd, "", AT_EMPTY_PATH)` (needs `CAP_DAC_READ_SEARCH` on most kernels)
const EMPTY_PATH: u8 = 1;
/// unnamed, `linkat("/proc/self/fd/N", AT_SYMLINK_FOLLOW)`
const PROC_FD: u8 = 2;
/// named temporaries and a rename: the file system refuses `O_TMPFILE`, no way to link an
/// unnamed file, or `ZNIPPY_EXTRACT_NAMING=named` (the tests' way to force it)
const NAMED: u8 = 3;

/// `partfile.SUFFIX`
pub(super) const SUFFIX: &str = ".znippy-part-";
pub(super) const NAME_MAX: usize = 255;
/// `posix.PRESERVED_BITS`: never setuid/setgid
pub(super) const PRESERVED_BITS: u32 = 0o1777;

pub(super) fn open_dir_at(parent: RawFd, comp: &[u8]) -> std::io::Result<OwnedFd> {
    let c = CString::new(comp).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    for _ in 0..2 {
        // SAFETY: `c` is a NUL-terminated name, `parent` an open directory descriptor.
        let fd = unsafe { libc::openat(parent, c.as_ptr(), flags) };
        if fd >= 0 {
            // SAFETY: `fd` was just opened and is owned by nothing else.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = last_error();
        if e.raw_os_error() != Some(libc::ENOENT) {
            return Err(e);
        }
        // SAFETY: as above; a missing directory is made (0o777 under umask, as makedirs)
        if unsafe { libc::mkdirat(parent, c.as_ptr(), 0o777) } != 0 {
            let e = last_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(e);
            }
        }
    }
    Err(std::io::Error::from_raw_os_error(libc::ENOENT))
}

/// The destination, opened once: every target is opened relative to it.
pub(super) fn open_root(root: &str) -> PyResult<OwnedFd> {
    let c = CString::new(root)?;
    // SAFETY: a NUL-terminated path
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = last_error();
        return Err(crate::errors::Error::new(
            crate::errors::Kind::Io,
            format!("cannot open the destination: {}", strerror(&e)),
        )
        .at(root)
        .into());
    }
    // the tests' way to take each fallback: `named` temporaries, `proc` links
    let forced = std::env::var_os("ZNIPPY_EXTRACT_NAMING");
    let how = match forced.as_ref().map(|v| v.as_bytes()) {
        Some(b"named") => NAMED,
        Some(b"proc") => PROC_FD,
        _ => UNTRIED,
    };
    NAMING.store(how, Ordering::Relaxed);
    // SAFETY: just opened, owned by nothing else
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Link the unnamed file `fd` as `name` in `dir`, the way `how` says.
fn link_unnamed(how: u8, fd: RawFd, dir: RawFd, name: &CString) -> std::io::Result<()> {
    // SAFETY (both calls): an open descriptor, NUL-terminated names relative to an open
    // directory descriptor; `linkat` never replaces an existing name
    let done = if how == EMPTY_PATH {
        unsafe { libc::linkat(fd, c"".as_ptr(), dir, name.as_ptr(), libc::AT_EMPTY_PATH) }
    } else {
        let path = CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL in it");
        unsafe {
            libc::linkat(
                libc::AT_FDCWD,
                path.as_ptr(),
                dir,
                name.as_ptr(),
                libc::AT_SYMLINK_FOLLOW,
            )
        }
    };
    if done == 0 {
        Ok(())
    } else {
        Err(last_error())
    }
}

impl Job {
    pub(super) fn dir(&self, w: &mut Worker, rel: &[u8]) -> std::io::Result<RawFd> {
        if let Some((r, fd)) = &w.dir {
            if r == rel {
                return Ok(fd.as_raw_fd());
            }
        }
        w.dir = None;
        let mut cur: Option<OwnedFd> = None;
        if !rel.is_empty() {
            for comp in rel.split(|b| *b == b'/') {
                let parent = cur
                    .as_ref()
                    .map_or(self.root.as_raw_fd(), |f| f.as_raw_fd());
                cur = Some(open_dir_at(parent, comp)?);
            }
        }
        let fd = match cur {
            Some(fd) => fd,
            None => self.root.try_clone()?,
        };
        let raw = fd.as_raw_fd();
        w.dir = Some((rel.to_vec(), fd));
        Ok(raw)
    }

    pub(super) fn tmp_name(&self, name: &[u8]) -> Vec<u8> {
        let suffix = format!("{SUFFIX}{}", self.pid);
        let mut out = vec![b'.'];
        if name.len() + suffix.len() + 1 > NAME_MAX {
            // a name too long for the file system gets a short hashed one, still recognisable
            out.extend(blake3::hash(name).to_hex().as_bytes()[..32].iter());
        } else {
            out.extend(name);
        }
        out.extend(suffix.as_bytes());
        out
    }

    /// A new file for `name` in `dir`, and the name it is written under: empty for an
    /// unnamed one (`O_TMPFILE`), else a temporary (`O_EXCL`, never through a symlink; one of
    /// this process left by an earlier failure is replaced).
    pub(super) fn create(&self, dir: RawFd, name: &[u8]) -> Result<(File, CString), Fail> {
        if NAMING.load(Ordering::Relaxed) != NAMED {
            let flags = libc::O_RDWR | libc::O_TMPFILE | libc::O_CLOEXEC;
            // SAFETY: "." of an open directory descriptor
            let fd = unsafe { libc::openat(dir, c".".as_ptr(), flags, 0o644 as libc::c_uint) };
            if fd >= 0 {
                // SAFETY: `fd` was just opened and is owned by nothing else.
                let file = unsafe { File::from_raw_fd(fd) };
                if self.probe(dir, name)? {
                    return Ok((file, CString::default()));
                }
            } else if matches!(
                last_error().raw_os_error(),
                Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
            ) {
                NAMING.store(NAMED, Ordering::Relaxed); // this file system: not for this extract
            }
        }
        let tmp = cstr(&self.tmp_name(name))?;
        let flags =
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: NUL-terminated names relative to an open directory descriptor.
        let mut fd = unsafe { libc::openat(dir, tmp.as_ptr(), flags, 0o644 as libc::c_uint) };
        if fd < 0 && last_error().raw_os_error() == Some(libc::EEXIST) {
            unsafe { libc::unlinkat(dir, tmp.as_ptr(), 0) };
            fd = unsafe { libc::openat(dir, tmp.as_ptr(), flags, 0o644 as libc::c_uint) };
        }
        if fd < 0 {
            return Err(write_fail(last_error()));
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        Ok((unsafe { File::from_raw_fd(fd) }, tmp))
    }

    /// Whether an unnamed file can be given a name, known after the first file of an
    /// extract: another unnamed (empty) file is linked under the temporary name and unlinked
    /// again (not `file` itself: once linked and unlinked, a file cannot be linked again).
    fn probe(&self, dir: RawFd, name: &[u8]) -> Result<bool, Fail> {
        match NAMING.load(Ordering::Relaxed) {
            UNTRIED => {}
            how => return Ok(how != NAMED),
        }
        let tmp = cstr(&self.tmp_name(name))?;
        let flags = libc::O_RDWR | libc::O_TMPFILE | libc::O_CLOEXEC;
        for how in [EMPTY_PATH, PROC_FD] {
            // SAFETY: "." of an open directory descriptor
            let fd = unsafe { libc::openat(dir, c".".as_ptr(), flags, 0o644 as libc::c_uint) };
            if fd < 0 {
                break;
            }
            // SAFETY: `fd` was just opened and is owned by nothing else.
            let trial = unsafe { OwnedFd::from_raw_fd(fd) };
            // SAFETY: a NUL-terminated name relative to an open directory descriptor
            unsafe { libc::unlinkat(dir, tmp.as_ptr(), 0) };
            if link_unnamed(how, trial.as_raw_fd(), dir, &tmp).is_ok() {
                unsafe { libc::unlinkat(dir, tmp.as_ptr(), 0) };
                NAMING.store(how, Ordering::Relaxed);
                return Ok(true);
            }
        }
        NAMING.store(NAMED, Ordering::Relaxed);
        Ok(false)
    }

    /// Mode and mtime (`--preserve`) on the descriptor, before the rename.
    pub(super) fn finish(&self, file: &File, item: &Item<'_>) -> Result<(), Fail> {
        if item.mode >= 0 {
            // SAFETY: an open descriptor
            if unsafe { libc::fchmod(file.as_raw_fd(), item.mode as u32 & PRESERVED_BITS) } != 0 {
                return Err(write_fail(last_error()));
            }
        }
        if item.mtime != i64::MIN {
            let t = libc::timespec {
                tv_sec: item.mtime.div_euclid(1_000_000_000) as libc::time_t,
                tv_nsec: item.mtime.rem_euclid(1_000_000_000) as libc::c_long,
            };
            let times = [t, t];
            // SAFETY: an open descriptor and two timespecs
            if unsafe { libc::futimens(file.as_raw_fd(), times.as_ptr()) } != 0 {
                return Err(write_fail(last_error()));
            }
        }
        Ok(())
    }

    /// The file (`tmp`: its temporary name, empty for an unnamed one) under its final name:
    /// replacing what is there, or (`replace` false) never (a hard link, atomic; a file system
    /// without them: a check and a rename).
    pub(super) fn place(
        &self,
        dir: RawFd,
        file: &File,
        tmp: &CString,
        name: &CString,
    ) -> Result<(), Fail> {
        if tmp.is_empty() {
            let how = NAMING.load(Ordering::Relaxed);
            let e = match link_unnamed(how, file.as_raw_fd(), dir, name) {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if !self.replace || e.raw_os_error() != Some(libc::EEXIST) {
                return Err(write_fail(e));
            }
            // a name taken (--overwrite): linked under the temporary name, renamed over it
            let tmp = cstr(&self.tmp_name(name.as_bytes()))?;
            if let Err(e) = link_unnamed(how, file.as_raw_fd(), dir, &tmp) {
                if e.raw_os_error() != Some(libc::EEXIST) {
                    return Err(write_fail(e));
                }
                // one of this process left by an earlier failure: replaced
                // SAFETY: a NUL-terminated name relative to an open directory
                unsafe { libc::unlinkat(dir, tmp.as_ptr(), 0) };
                link_unnamed(how, file.as_raw_fd(), dir, &tmp).map_err(write_fail)?;
            }
            // SAFETY (both calls): NUL-terminated names relative to an open directory
            if unsafe { libc::renameat(dir, tmp.as_ptr(), dir, name.as_ptr()) } != 0 {
                let e = last_error();
                unsafe { libc::unlinkat(dir, tmp.as_ptr(), 0) };
                return Err(write_fail(e));
            }
            return Ok(());
        }
        // SAFETY (every call here): NUL-terminated names relative to an open directory.
        if self.replace {
            if unsafe { libc::renameat(dir, tmp.as_ptr(), dir, name.as_ptr()) } != 0 {
                return Err(write_fail(last_error()));
            }
            return Ok(());
        }
        if unsafe { libc::linkat(dir, tmp.as_ptr(), dir, name.as_ptr(), 0) } == 0 {
            unsafe { libc::unlinkat(dir, tmp.as_ptr(), 0) };
            return Ok(());
        }
        let e = last_error();
        if e.raw_os_error() == Some(libc::EEXIST) {
            return Err(write_fail(e));
        }
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        if unsafe {
            libc::fstatat(
                dir,
                name.as_ptr(),
                st.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        } == 0
        {
            return Err(write_fail(std::io::Error::from_raw_os_error(libc::EEXIST)));
        }
        if unsafe { libc::renameat(dir, tmp.as_ptr(), dir, name.as_ptr()) } != 0 {
            return Err(write_fail(last_error()));
        }
        Ok(())
    }

    /// The temporary a big file's runs fill: its rows checked, created empty.
    pub(super) fn create_split(
        &self,
        w: &mut Worker,
        item: &Item<'_>,
    ) -> Result<(Arc<File>, OwnedFd, CString, CString), Fail> {
        self.cols.file_rows(&item.path, item.row)?;
        let (rel, name) = match item.name.iter().rposition(|b| *b == b'/') {
            Some(at) => (&item.name[..at], &item.name[at + 1..]),
            None => (&b""[..], item.name),
        };
        let raw = self.dir(w, rel).map_err(write_fail)?;
        let dir = w
            .dir
            .as_ref()
            .filter(|(_, fd)| fd.as_raw_fd() == raw)
            .map(|(_, fd)| fd.try_clone())
            .ok_or_else(|| Fail::File("cannot write: its directory went".into()))?
            .map_err(write_fail)?;
        let (file, tmp) = self.create(dir.as_raw_fd(), name)?;
        Ok((Arc::new(file), dir, tmp, cstr(name)?))
    }
}

/// What [`check_targets`] returns.
pub(super) type Checked = (Option<(usize, String)>, Py<PyBytes>, Vec<String>);

/// `paths.Targets.target` of every name under `root` (`dest` as the caller gave it, for
/// messages): each directory on the way and the target itself `lstat`-ed once, a symlink
/// there refused. Returns the first problem `(name, why)`, whether each target exists
/// (u8 each), and the parent directories that exist (absolute, with a trailing `/`).
#[pyfunction]
pub(super) fn check_targets(
    py: Python<'_>,
    dest: &str,
    root: &str,
    names: &Bound<'_, PyAny>,
    name_offsets: &Bound<'_, PyAny>,
) -> PyResult<Checked> {
    let names = buffer_vec(names)?;
    let offs = le64(&buffer_vec(name_offsets)?);
    let (problem, exists, dirs) = py.detach(|| {
        let base = std::path::Path::new(root);
        let lstat = |rel: &[u8]| std::fs::symlink_metadata(base.join(std::ffi::OsStr::from_bytes(rel)));
        let mut known: HashMap<Vec<u8>, bool> = HashMap::new();
        let mut parents: HashMap<Vec<u8>, bool> = HashMap::new();
        let mut order: Vec<Vec<u8>> = Vec::new();
        let mut exists = vec![0u8; offs.len().saturating_sub(1)];
        for k in 0..exists.len() {
            let (a, b) = (offs[k] as usize, offs[k + 1] as usize);
            let Some(name) = names.get(a..b) else { break };
            let shown = || py_repr(&String::from_utf8_lossy(name));
            let rel = match name.iter().rposition(|c| *c == b'/') {
                Some(at) => &name[..at],
                None => &b""[..],
            };
            let there = match parents.get(rel) {
                Some(t) => *t,
                None => {
                    let mut there = true;
                    if !rel.is_empty() {
                        let mut at = 0;
                        loop {
                            let end = rel[at..].iter().position(|c| *c == b'/').map_or(rel.len(), |p| at + p);
                            let prefix = &rel[..end];
                            let t = match known.get(prefix) {
                                Some(t) => *t,
                                None => {
                                    let t = match lstat(prefix) {
                                        Err(_) => false,
                                        Ok(m) if m.file_type().is_symlink() => {
                                            return (
                                                Some((k, format!(
                                                    "entry path {} resolves outside {dest} (through the symlink {})",
                                                    shown(),
                                                    py_repr(&String::from_utf8_lossy(prefix))
                                                ))),
                                                exists,
                                                Vec::new(),
                                            );
                                        }
                                        Ok(m) => m.is_dir(),
                                    };
                                    known.insert(prefix.to_vec(), t);
                                    t
                                }
                            };
                            there = t;
                            if end == rel.len() {
                                break;
                            }
                            at = end + 1;
                        }
                    }
                    parents.insert(rel.to_vec(), there);
                    order.push(rel.to_vec());
                    there
                }
            };
            if !there {
                continue;
            }
            if let Ok(m) = lstat(name) {
                if m.file_type().is_symlink() {
                    return (
                        Some((k, format!("entry path {} points at an existing symlink", shown()))),
                        exists,
                        Vec::new(),
                    );
                }
                exists[k] = 1;
            }
        }
        let dirs = order
            .into_iter()
            .filter(|r| parents.get(r).copied().unwrap_or(false))
            .map(|r| {
                let mut p = base.join(std::ffi::OsStr::from_bytes(&r)).to_string_lossy().into_owned();
                if !p.ends_with('/') {
                    p.push('/');
                }
                p
            })
            .collect();
        (None, exists, dirs)
    });
    Ok((problem, PyBytes::new(py, &exists).unbind(), dirs))
}

/// The sweep of `read/extract.py`: the temporaries (`.NAME.znippy-part-PID`) of extracts no longer
/// running removed from these existing directories; how many.
#[pyfunction]
pub(super) fn remove_leftovers(py: Python<'_>, directories: Vec<String>) -> usize {
    py.detach(|| {
        let me = std::process::id();
        let mut n = 0;
        for d in directories {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let name = name.as_bytes();
                let Some(at) = name
                    .windows(SUFFIX.len())
                    .rposition(|w| w == SUFFIX.as_bytes())
                else {
                    continue;
                };
                let digits = &name[at + SUFFIX.len()..];
                if name.first() != Some(&b'.')
                    || at < 1
                    || digits.is_empty()
                    || !digits.iter().all(u8::is_ascii_digit)
                {
                    continue;
                }
                let alive = match std::str::from_utf8(digits)
                    .ok()
                    .and_then(|s| s.parse::<i32>().ok())
                {
                    None => false, // beyond any pid
                    Some(pid) if pid as u32 == me || pid == 0 => true,
                    // SAFETY: signal 0 only asks whether the process exists
                    Some(pid) => {
                        (unsafe { libc::kill(pid, 0) } == 0
                            || last_error().raw_os_error() == Some(libc::EPERM))
                    }
                };
                let plain = entry
                    .file_type()
                    .is_ok_and(|t| t.is_file() || t.is_symlink());
                if !alive && plain && std::fs::remove_file(entry.path()).is_ok() {
                    n += 1;
                }
            }
        }
        n
    })
}
