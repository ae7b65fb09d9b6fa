package generator

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// importPath returns the Go import path of the directory dir (absolute; it
// need not exist yet): the module path in the nearest go.mod at or above
// dir, joined with dir's path below that go.mod. shown names dir in errors.
func importPath(dir, shown string) (string, error) {
	root := findModuleRoot(dir)
	if root == "" {
		return "", fmt.Errorf("no go.mod in %s or any directory above it: the generated code imports its %s subpackage by module path (run `go mod init <module path>` first)",
			shown, dbPackage)
	}
	gomod := filepath.Join(root, "go.mod")
	data, err := os.ReadFile(gomod)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", gomod, err)
	}
	module, err := modulePath(data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", gomod, err)
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return "", fmt.Errorf("locate %s in module %s: %w", shown, module, err)
	}
	return path.Join(module, filepath.ToSlash(rel)), nil
}

// findModuleRoot returns the nearest directory at or above dir that holds a
// go.mod file, or "" when there is none. Like the go command, it treats a
// go.mod it cannot stat as absent.
func findModuleRoot(dir string) string {
	for d := filepath.Clean(dir); ; {
		if info, err := os.Stat(filepath.Join(d, "go.mod")); err == nil && !info.IsDir() {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return ""
		}
		d = parent
	}
}

// modulePath returns the module path declared by the go.mod contents data.
// It reads the module directive only (the rest of the file may be anything
// the go command accepts), quoted or not, ignoring comments.
func modulePath(data []byte) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != "module" {
			continue
		}
		if len(fields) != 2 {
			return "", fmt.Errorf("malformed module directive %q", strings.TrimSpace(line))
		}
		mod := fields[1]
		if strings.HasPrefix(mod, `"`) || strings.HasPrefix(mod, "`") {
			unquoted, err := strconv.Unquote(mod)
			if err != nil {
				return "", fmt.Errorf("malformed module path %s: %w", mod, err)
			}
			mod = unquoted
		}
		if mod == "" {
			return "", errors.New("empty module path")
		}
		return mod, nil
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("no module directive")
}
