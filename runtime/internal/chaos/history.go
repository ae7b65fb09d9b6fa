package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// Event kinds a worker records.
const (
	// KindHold: a critical section (or leader term) began. T0 is when
	// the acquire call was made, T1 when fn was entered.
	KindHold = "hold"
	// KindCheck: a ctx.Err() or lease.Err() check inside a section or a
	// handler; T0 and T1 bracket the call, OK says it returned nil.
	KindCheck = "check"
	// KindEnd: a section or handler returned.
	KindEnd = "end"
	// KindHandle: a job handler began (Run, Token = the run's claim).
	KindHandle = "handle"
	// KindEnqueue: an enqueue returned the run's ID (Run).
	KindEnqueue = "enqueue"
	// KindGuarded: a guarded write committed with Token.
	KindGuarded = "guarded"
	// KindError: a call failed in a way worth counting (Err).
	KindError = "error"
)

// Event is one line of a worker's history. Times are the machine's
// CLOCK_MONOTONIC in nanoseconds, comparable across processes.
type Event struct {
	Kind string `json:"k"`
	// Proc and Inc are the worker's slot and incarnation (restarts);
	// Sec numbers its sections and handler calls, so (Proc, Inc, Sec)
	// names one of them.
	Proc int `json:"p"`
	Inc  int `json:"i"`
	Sec  int `json:"s,omitempty"`
	// Obj is the lock or job; Key the lock key.
	Obj string `json:"o,omitempty"`
	Key string `json:"key,omitempty"`
	// Token is the fencing token of a holding, or the claim of a run.
	Token int64 `json:"tok,omitempty"`
	Run   int64 `json:"run,omitempty"`
	// Tick is a scheduled run's tick, Unix microseconds (UTC).
	Tick int64 `json:"tick,omitempty"`
	// What says which check was made (ctx or lease) or which call failed.
	What   string `json:"w,omitempty"`
	T0, T1 int64
	OK     bool   `json:"ok,omitempty"`
	Err    string `json:"err,omitempty"`
}

// Mono returns CLOCK_MONOTONIC in nanoseconds: the same clock in every
// process of the machine, which a SIGSTOP does not stop.
func Mono() int64 {
	var ts syscall.Timespec
	// 1 is CLOCK_MONOTONIC.
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic(fmt.Sprintf("clock_gettime: %v", errno))
	}
	return ts.Nano()
}

// Recorder appends events to a history file, one write per event and no
// buffering, so an event recorded before a SIGKILL is kept.
type Recorder struct {
	mu   sync.Mutex
	f    *os.File
	proc int
	inc  int
	sec  int
}

// NewRecorder creates the history file of worker proc's incarnation inc
// in dir.
func NewRecorder(dir string, proc, inc int) (*Recorder, error) {
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("p%d-i%d.jsonl", proc, inc)), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return &Recorder{f: f, proc: proc, inc: inc}, nil
}

// Section returns a fresh section number.
func (r *Recorder) Section() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sec++
	return r.sec
}

// Record writes e, filling in the worker's slot and incarnation.
func (r *Recorder) Record(e Event) {
	e.Proc, e.Inc = r.proc, r.inc
	b, err := json.Marshal(e)
	if err != nil {
		panic(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.f.Write(append(b, '\n')); err != nil {
		panic(fmt.Sprintf("chaos: writing the history: %v", err))
	}
}

// ReadHistory reads every history file in dir, in time order (by T1).
// A last line cut short by a SIGKILL is dropped.
func ReadHistory(dir string) ([]Event, error) {
	files, err := filepath.Glob(filepath.Join(dir, "p*-i*.jsonl"))
	if err != nil {
		return nil, err
	}
	var events []Event
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" {
				continue
			}
			var e Event
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				continue // a write cut short by SIGKILL
			}
			events = append(events, e)
		}
		_ = f.Close()
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].T1 < events[j].T1 })
	return events, nil
}

// Dur formats a monotonic difference.
func Dur(ns int64) string { return time.Duration(ns).Round(time.Millisecond).String() }
