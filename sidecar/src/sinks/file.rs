//! The audit file: appended to, rotated by size, a fixed number kept.
//!
//! Where it sits: the audit writer thread ([`crate::gates::audit`])
//! writes whole lines into it. When a line would take the file past
//! `max_bytes`, the file is closed and renamed `PATH.1` (`PATH.1` becomes
//! `PATH.2`, …; the one past `keep` is deleted) and a new `PATH` is
//! started, so a line is never split across files and a log shipper that
//! follows `PATH` by name sees a plain rotation. `max_bytes` 0: never rotated.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// How the audit file is rotated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rotation {
    /// Rotate before a line would take the file past this (0: never).
    pub max_bytes: u64,
    /// Rotated files kept besides the live one (`PATH.1` … `PATH.<keep>`).
    pub keep: usize,
}

impl Default for Rotation {
    fn default() -> Self {
        Rotation {
            max_bytes: 100 * 1024 * 1024,
            keep: 5,
        }
    }
}

pub struct RotatingFile {
    path: PathBuf,
    rotation: Rotation,
    file: File,
    size: u64,
}

impl RotatingFile {
    pub fn open(path: &Path, rotation: Rotation) -> io::Result<RotatingFile> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let size = file.metadata()?.len();
        Ok(RotatingFile {
            path: path.to_path_buf(),
            rotation,
            file,
            size,
        })
    }

    /// Append `batch` (whole lines), rotating between lines as needed.
    pub fn write_lines(&mut self, batch: &[u8]) -> io::Result<()> {
        let mut rest = batch;
        while !rest.is_empty() {
            // As many whole lines as fit (at least one: a line longer than
            // the limit gets a file of its own).
            let room = self.rotation.max_bytes.saturating_sub(self.size);
            let cut = if self.rotation.max_bytes == 0 {
                rest.len()
            } else {
                whole_lines_within(rest, room as usize)
            };
            if cut == 0 {
                if self.size > 0 {
                    self.rotate()?;
                    continue;
                }
                let first = memchr::memchr(b'\n', rest).map_or(rest.len(), |i| i + 1);
                self.append(&rest[..first])?;
                rest = &rest[first..];
                continue;
            }
            self.append(&rest[..cut])?;
            rest = &rest[cut..];
        }
        Ok(())
    }

    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all(bytes)?;
        self.size += bytes.len() as u64;
        Ok(())
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.file.flush()?;
        let numbered = |n: usize| {
            let mut p = self.path.clone().into_os_string();
            p.push(format!(".{n}"));
            PathBuf::from(p)
        };
        if self.rotation.keep == 0 {
            std::fs::remove_file(&self.path)?;
        } else {
            let _ = std::fs::remove_file(numbered(self.rotation.keep));
            for n in (1..self.rotation.keep).rev() {
                let from = numbered(n);
                if from.exists() {
                    std::fs::rename(&from, numbered(n + 1))?;
                }
            }
            std::fs::rename(&self.path, numbered(1))?;
        }
        self.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        self.size = 0;
        Ok(())
    }
}

/// The length of the longest prefix of `bytes` made of whole lines and at
/// most `room` long.
fn whole_lines_within(bytes: &[u8], room: usize) -> usize {
    let window = &bytes[..bytes.len().min(room)];
    if window.len() == bytes.len() && bytes.ends_with(b"\n") {
        return bytes.len();
    }
    memchr::memrchr(b'\n', window).map_or(0, |i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch folder removed when the test ends (pass or fail).
    fn dir(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("mcp-warden-rot-{name}-"))
            .tempdir()
            .unwrap()
    }

    #[test]
    fn rotates_between_lines_and_keeps_the_newest_files() {
        let tmp = dir("keep");
        let d = tmp.path();
        let path = d.join("audit.jsonl");
        let rotation = Rotation {
            max_bytes: 100,
            keep: 2,
        };
        let mut f = RotatingFile::open(&path, rotation).unwrap();
        // 40 lines of 10 bytes, in batches of 3: 10 lines per file.
        let lines: Vec<String> = (0..40).map(|i| format!("line-{i:04}\n")).collect();
        for chunk in lines.chunks(3) {
            f.write_lines(chunk.concat().as_bytes()).unwrap();
        }
        let read = |p: &Path| std::fs::read_to_string(p).unwrap();
        let live = read(&path);
        let one = read(&d.join("audit.jsonl.1"));
        let two = read(&d.join("audit.jsonl.2"));
        assert!(!d.join("audit.jsonl.3").exists());
        for text in [&live, &one, &two] {
            assert!(text.len() <= 100 && text.ends_with('\n'), "{text:?}");
        }
        assert_eq!(two + &one + &live, lines[10..].concat());
    }

    #[test]
    fn a_line_longer_than_the_limit_gets_a_file_of_its_own() {
        let tmp = dir("long");
        let d = tmp.path();
        let path = d.join("a");
        let mut f = RotatingFile::open(
            &path,
            Rotation {
                max_bytes: 8,
                keep: 3,
            },
        )
        .unwrap();
        f.write_lines(b"ab\nthis-is-long\ncd\n").unwrap();
        assert_eq!(std::fs::read_to_string(d.join("a.2")).unwrap(), "ab\n");
        assert_eq!(
            std::fs::read_to_string(d.join("a.1")).unwrap(),
            "this-is-long\n"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "cd\n");
    }

    #[test]
    fn zero_never_rotates_and_reopening_appends() {
        let tmp = dir("zero");
        let d = tmp.path();
        let path = d.join("a");
        let r = Rotation {
            max_bytes: 0,
            keep: 1,
        };
        RotatingFile::open(&path, r)
            .unwrap()
            .write_lines(&b"x\n".repeat(1000))
            .unwrap();
        RotatingFile::open(&path, r)
            .unwrap()
            .write_lines(b"y\n")
            .unwrap();
        assert_eq!(std::fs::read(&path).unwrap().len(), 2002);
        assert!(!d.join("a.1").exists());
    }
}
