package driver

import (
	sqldriver "database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"unicode/utf8"
)

// Bounds of a run's headers (NewRun.Headers), which the runs table's
// headers column stores as a JSON object: enough for a W3C traceparent and
// a full tracestate (512 bytes) with baggage, small enough that claims
// stay cheap.
const (
	// MaxHeaders is the most headers a run may carry.
	MaxHeaders = 16
	// MaxHeadersBytes bounds the headers' names and values together.
	MaxHeadersBytes = 4096
)

// ErrHeaders is wrapped by CheckHeaders' errors.
var ErrHeaders = errors.New("lockgen: invalid run headers")

// CheckHeaders returns an error wrapping ErrHeaders, naming the header,
// when h has more than MaxHeaders entries, an empty name, a name or value
// that is not UTF-8, or more than MaxHeadersBytes of names and values.
func CheckHeaders(h Headers) error {
	if len(h) > MaxHeaders {
		return fmt.Errorf("%w: %d headers, at most %d", ErrHeaders, len(h), MaxHeaders)
	}
	size := 0
	for _, name := range sortedNames(h) {
		v := h[name]
		switch {
		case name == "":
			return fmt.Errorf("%w: a header has an empty name", ErrHeaders)
		case !utf8.ValidString(name) || !utf8.ValidString(v):
			return fmt.Errorf("%w: header %q is not valid UTF-8", ErrHeaders, name)
		}
		size += len(name) + len(v)
	}
	if size > MaxHeadersBytes {
		return fmt.Errorf("%w: %d bytes of names and values, at most %d", ErrHeaders, size, MaxHeadersBytes)
	}
	return nil
}

// Headers are a run's headers: string values its producer set, which
// travel with the run to each attempt (NewRun.Headers, Run.Headers). The
// runs table's headers column stores them as a JSON object; as a statement
// argument (driver.Valuer) none are NULL, and scanned (sql.Scanner) NULL,
// an empty object or anything but a JSON object of strings (a row written
// by hand) are none, so that a malformed header never stops a run from
// being claimed.
type Headers map[string]string

// Value implements database/sql/driver.Valuer: NULL for no headers, else
// the JSON object.
func (h Headers) Value() (sqldriver.Value, error) {
	if len(h) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(map[string]string(h))
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// Scan implements database/sql.Scanner (see Headers).
func (h *Headers) Scan(src any) error {
	var raw []byte
	switch v := src.(type) {
	case nil:
	case []byte:
		raw = v
	case string:
		raw = []byte(v)
	default:
		return fmt.Errorf("lockgen: run headers: cannot scan %T", src)
	}
	*h = nil
	var m map[string]string
	if len(raw) > 0 && json.Unmarshal(raw, &m) == nil && len(m) > 0 {
		*h = m
	}
	return nil
}

// sortedNames returns h's names in order, so that errors are repeatable.
func sortedNames(h Headers) []string {
	names := make([]string, 0, len(h))
	for n := range h {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
