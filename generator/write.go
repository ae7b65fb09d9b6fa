package generator

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Write writes every file of r under r.Dir, creating directories as needed,
// and removes r's Leftovers, or does none of it. Each file is first written
// to a temporary file next to its target; only when all of them are written
// are they renamed into place, and then the leftovers removed. On failure,
// temporary files and the directories Write created are removed, and files
// already renamed or removed are restored to their previous contents (best
// effort: a failure to restore is reported with the error). Files whose
// contents are already on disk are left untouched.
func (r *Result) Write() (err error) {
	var tx writeTx
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.rollback())
		}
	}()
	for _, p := range r.Paths() {
		if err := tx.stage(filepath.Join(r.Dir, filepath.FromSlash(p)), r.Files[p]); err != nil {
			return err
		}
	}
	leftovers, err := r.Leftovers()
	if err != nil {
		return err
	}
	for _, l := range leftovers {
		if err := tx.stageRemove(filepath.Join(r.Dir, filepath.FromSlash(l.Path))); err != nil {
			return err
		}
	}
	return tx.commit()
}

// writeTx writes a set of files all or none.
type writeTx struct {
	staged    []stagedFile
	committed int      // staged[:committed] are renamed into place
	dirs      []string // directories created, parents first
}

// stagedFile is a file written to a temporary name, or to be removed.
type stagedFile struct {
	target, temp string // temp is empty when remove
	remove       bool
	existed      bool
	old          []byte // previous contents, when existed
	mode         fs.FileMode
}

// stage writes data to a temporary file next to target, unless target
// already holds data.
func (tx *writeTx) stage(target string, data []byte) error {
	old, err := os.ReadFile(target)
	existed := err == nil
	switch {
	case existed && bytes.Equal(old, data):
		return nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("write %s: %w", target, err)
	}
	mode := fs.FileMode(0o644)
	if existed {
		if info, err := os.Stat(target); err == nil {
			mode = info.Mode().Perm()
		}
	}
	if err := tx.mkdirAll(filepath.Dir(target)); err != nil {
		return err
	}
	temp, err := writeTemp(filepath.Dir(target), filepath.Base(target), data, mode)
	if err != nil {
		return fmt.Errorf("write %s: %w", target, err)
	}
	tx.staged = append(tx.staged, stagedFile{target: target, temp: temp, existed: existed, old: old, mode: mode})
	return nil
}

// stageRemove remembers target, to be removed by commit and restored by
// rollback; nothing when it does not exist.
func (tx *writeTx) stageRemove(target string) error {
	old, err := os.ReadFile(target)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", target, err)
	}
	info, err := os.Stat(target)
	if err != nil {
		return fmt.Errorf("remove %s: %w", target, err)
	}
	tx.staged = append(tx.staged, stagedFile{target: target, remove: true, existed: true, old: old, mode: info.Mode().Perm()})
	return nil
}

// mkdirAll creates dir and its missing parents, remembering those it
// created.
func (tx *writeTx) mkdirAll(dir string) error {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || filepath.Dir(d) == d {
			break
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create directory: %w", err)
		}
		tx.dirs = append(tx.dirs, missing[i])
	}
	return nil
}

// writeTemp writes data to a new hidden temporary file in dir and returns
// its path.
func writeTemp(dir, base string, data []byte, mode fs.FileMode) (string, error) {
	f, err := os.CreateTemp(dir, "."+base+".lockgen-*")
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	err = errors.Join(err, f.Chmod(mode), f.Close())
	if err != nil {
		return "", errors.Join(err, os.Remove(f.Name()))
	}
	return f.Name(), nil
}

// commit renames every staged file into place and removes those staged
// for removal, in the order they were staged.
func (tx *writeTx) commit() error {
	for _, s := range tx.staged {
		if s.remove {
			if err := os.Remove(s.target); err != nil {
				return fmt.Errorf("remove %s: %w", s.target, err)
			}
		} else if err := os.Rename(s.temp, s.target); err != nil {
			return fmt.Errorf("write %s: %w", s.target, err)
		}
		tx.committed++
	}
	return nil
}

// rollback undoes what stage and commit did.
func (tx *writeTx) rollback() error {
	var errs []error
	for i, s := range tx.staged {
		if i >= tx.committed {
			if !s.remove {
				errs = append(errs, ignoreNotExist(os.Remove(s.temp)))
			}
			continue
		}
		if !s.existed {
			errs = append(errs, ignoreNotExist(os.Remove(s.target)))
			continue
		}
		temp, err := writeTemp(filepath.Dir(s.target), filepath.Base(s.target), s.old, s.mode)
		if err == nil {
			err = os.Rename(temp, s.target)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("restore %s: %w", s.target, err))
		}
	}
	for i := len(tx.dirs) - 1; i >= 0; i-- {
		errs = append(errs, ignoreNotExist(os.Remove(tx.dirs[i])))
	}
	return errors.Join(errs...)
}

// ignoreNotExist returns nil for an error saying a file does not exist.
func ignoreNotExist(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
