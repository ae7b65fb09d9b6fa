package spec

import (
	"bytes"
	"errors"
	"fmt"
	"go/token"
	"io"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Defaults applied by Load.
const (
	DefaultOut           = "."
	DefaultMigrationsDir = "migrations"
	DefaultTablePrefix   = "lockgen_"
)

// topFields are the keys of the top-level mapping.
var topFields = []field{
	{name: "version", required: true, example: "version: 1"},
	{name: "package", required: true, example: "package: locks"},
	{name: "out", example: "out: internal/locks"},
	{name: "migrations", example: "migrations: {dir: migrations, format: golang-migrate}"},
	{name: "table_prefix", example: "table_prefix: lockgen_"},
	// locks is required unless jobs are declared (checked in spec).
	{name: "locks", example: "locks: [{name: master, ttl: 3s}]"},
	{name: "queues", example: "queues: [{name: mail, concurrency: 10}]"},
	{name: "jobs", example: "jobs: [{name: send_sms, args: {order_id: int64}}]"},
}

// migrationsFields are the keys of the migrations mapping.
var migrationsFields = []field{
	{name: "dir", example: "dir: db/migrations"},
	{name: "format", example: "format: golang-migrate"},
}

// formats are the supported migration formats.
var formats = []string{FormatGolangMigrate, FormatGoose}

// LoadFile reads the spec file at path and loads it with Load, using path as
// the file name in errors. An error reading the file is returned as is (it
// is not an ErrorList).
func LoadFile(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Load(path, data)
}

// Load parses and validates a spec; filename is used in error messages only.
//
// It never panics. It returns either a fully validated *Spec with every
// default applied and a nil error, or a nil *Spec and an ErrorList holding
// every problem found (not just the first), sorted by position.
func Load(filename string, data []byte) (*Spec, error) {
	l := &loader{file: filename}
	var s *Spec
	if root := l.parse(data); root != nil {
		s = l.spec(root)
	}
	if len(l.errs) > 0 {
		l.errs.sort()
		return nil, l.errs
	}
	s.File = filename
	return s, nil
}

// parse returns the root node of the single YAML document in data, or nil if
// there is none or it does not parse.
func (l *loader) parse(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := decode(dec, &doc)
	if err != nil && !errors.Is(err, io.EOF) {
		l.errs = append(l.errs, syntaxError(l.file, data, err))
		return nil
	}
	if err != nil || len(doc.Content) == 0 || isNull(doc.Content[0]) {
		l.errs = append(l.errs, &Error{File: l.file, Pos: Pos{Line: 1, Col: 1}, Msg: "the spec is empty",
			Hint: "start with version: 1, then package and locks"})
		return nil
	}
	var extra yaml.Node
	switch err := decode(dec, &extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		l.errs = append(l.errs, syntaxError(l.file, data, err))
	default:
		l.errorf(&extra, "remove the --- line and everything after it", "the spec must be a single YAML document")
	}
	return resolve(doc.Content[0])
}

// decode decodes the next document of dec into n. It turns a panic of the
// YAML parser into an error, so that Load keeps its promise never to panic
// even on input the parser mishandles.
func decode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: the YAML parser failed: %v", r)
		}
	}()
	return dec.Decode(n)
}

// spec validates the top-level mapping.
func (l *loader) spec(root *yaml.Node) *Spec {
	top, ok := l.mapping(root, "the top level of the spec", "version: 1", "", topFields)
	if !ok {
		return nil
	}
	s := &Spec{
		Out:         DefaultOut,
		Migrations:  Migrations{Dir: DefaultMigrationsDir, Format: FormatGolangMigrate},
		TablePrefix: DefaultTablePrefix,
	}
	if v, ok := top["version"]; ok {
		s.Version = l.version(v)
	}
	if v, ok := top["package"]; ok {
		s.Package = l.packageName(v)
	}
	if v, ok := top["out"]; ok {
		s.Out = l.relPath(v)
	}
	if v, ok := top["migrations"]; ok {
		s.Migrations = l.migrations(v)
	}
	if v, ok := top["table_prefix"]; ok {
		s.TablePrefix = l.tablePrefix(v)
	}
	if v, ok := top["locks"]; ok {
		s.Locks = l.locks(v)
	}
	_, hasLocks := top["locks"]
	jobs, hasJobs := top["jobs"]
	if !hasLocks && !hasJobs {
		f, _ := lookupField(topFields, "locks")
		l.errorf(root, "add it, e.g. "+f.example, "missing required key %q", f.name)
	}
	queues := l.queues(top["queues"], hasJobs)
	if hasJobs {
		s.Jobs, s.Queues = l.jobs(jobs, queues)
		l.jobLockClashes(s)
	}
	return s
}

// jobLockClashes reports a job whose generated methods on Locks
// (Enqueue<Job>, Enqueue<Job>Tx, Enqueue<Job>Many) equal a lock's, e.g. the
// leader lock "enqueue_report" (EnqueueReportLeader) and the job
// "report_leader"; each job is reported once, at its name.
func (l *loader) jobLockClashes(s *Spec) {
	owner := map[string]Lock{}
	for _, lk := range s.Locks {
		for _, m := range lk.Methods() {
			owner[m] = lk
		}
	}
	for _, j := range s.Jobs {
		if j.GoName == "" {
			continue
		}
		for _, m := range j.Methods() {
			if lk, clash := owner[m]; clash {
				l.errs = append(l.errs, &Error{File: l.file, Pos: j.Pos, Msg: fmt.Sprintf("job %q and lock %q both generate the method %s", j.Name, lk.Name, m),
					Hint: "rename one of them"})
				break
			}
		}
	}
}

// version checks that the version is the number 1.
func (l *loader) version(v value) int {
	if !l.scalar(v) {
		return 0
	}
	n, err := strconv.ParseInt(v.node.Value, 0, 64)
	switch {
	case v.node.Tag != "!!int" || err != nil:
		l.errorf(v.node, "write version: 1, without quotes", "version must be a whole number, not %q", v.node.Value)
	case n != 1:
		l.errorf(v.node, "lockgen knows only version: 1", "unsupported version %d", n)
	default:
		return 1
	}
	return 0
}

// goPackageName matches the package names lockgen accepts.
var goPackageName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// packageName checks that the package is a lower-case Go package name that
// can be imported.
func (l *loader) packageName(v value) string {
	name, ok := l.text(v)
	if !ok {
		return ""
	}
	const hint = "use a short lower-case name such as locks"
	switch {
	case !goPackageName.MatchString(name):
		l.errorf(v.node, hint, "package %q is not a lower-case Go package name", name)
	case token.IsKeyword(name):
		l.errorf(v.node, hint, "package %q is a Go keyword", name)
	case name == "main":
		l.errorf(v.node, "generated code is a library; "+hint, "package main cannot be imported")
	case strings.HasSuffix(name, "_test"):
		l.errorf(v.node, hint, "package %q ends in _test, which is reserved for test packages", name)
	default:
		return name
	}
	return ""
}

// relPath checks that a directory is relative and stays inside the spec
// file's directory, and returns it cleaned.
func (l *loader) relPath(v value) string {
	p, ok := l.text(v)
	if !ok {
		return ""
	}
	example := strings.TrimPrefix(v.field.example, v.field.name+": ")
	relative := "use a path relative to the spec file's directory, e.g. " + example
	switch clean := path.Clean(p); {
	case p == "":
		l.errorf(v.node, relative, "%s is empty", v.label)
	case strings.Contains(p, `\`):
		l.errorf(v.node, "use forward slashes, e.g. "+example, "%s %q contains a backslash", v.label, p)
	case path.IsAbs(p) || windowsVolume.MatchString(p):
		l.errorf(v.node, relative, "%s %q is an absolute path", v.label, p)
	case clean == ".." || strings.HasPrefix(clean, "../"):
		l.errorf(v.node, relative, "%s %q is outside the spec file's directory", v.label, p)
	default:
		return clean
	}
	return ""
}

// windowsVolume matches paths that start with a Windows drive letter.
var windowsVolume = regexp.MustCompile(`^[A-Za-z]:`)

// migrations validates the migrations mapping.
func (l *loader) migrations(v value) Migrations {
	m := Migrations{Dir: DefaultMigrationsDir, Format: FormatGolangMigrate}
	fields, ok := l.nested(v, migrationsFields)
	if !ok {
		return m
	}
	if v, ok := fields["dir"]; ok {
		m.Dir = l.relPath(v)
	}
	if v, ok := fields["format"]; ok {
		m.Format = l.format(v)
	}
	return m
}

// format checks a migrations format.
func (l *loader) format(v value) string {
	f, ok := l.text(v)
	if !ok {
		return ""
	}
	if slices.Contains(formats, f) {
		return f
	}
	l.errorf(v.node, choiceHint(f, formats, "supported formats"), "unknown migrations format %q", f)
	return ""
}

// tablePrefixRE matches valid table prefixes: lower-case SQL identifiers
// short enough that prefix + the longest table name fits in 64 characters.
var tablePrefixRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// maxTablePrefixLen is the longest table prefix.
const maxTablePrefixLen = 30

// tablePrefix checks the table prefix.
func (l *loader) tablePrefix(v value) string {
	p, ok := l.text(v)
	if !ok {
		return ""
	}
	switch {
	case !tablePrefixRE.MatchString(p):
		l.errorf(v.node, "use lower-case letters, digits and underscores, starting with a letter, e.g. lockgen_",
			"table_prefix %q is not a lower-case SQL identifier", p)
	case len(p) > maxTablePrefixLen:
		l.errorf(v.node, "table names must fit in 64 characters; shorten it",
			"table_prefix is %d characters long, the maximum is %d", len(p), maxTablePrefixLen)
	default:
		return p
	}
	return ""
}
