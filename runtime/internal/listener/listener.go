// Package listener finds the process that listens on a TCP port of this
// machine: the chaos harness and the cluster tests kill a database server
// or a cluster's node by it.
package listener

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// PID finds the process listening on TCP port (a decimal string)
// on this machine: the socket's inode from /proc/net/tcp and tcp6, then
// the process that has it open. It needs the privilege to read other
// users' /proc/<pid>/fd (root, as the harness and the cluster tests run).
func PID(port string) (int, error) {
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("port %q: %w", port, err)
	}
	want := fmt.Sprintf(":%04X", p)
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) > 9 && strings.HasSuffix(fields[1], want) && fields[3] == "0A" { // LISTEN
				inodes["socket:["+fields[9]+"]"] = true
			}
		}
		_ = f.Close()
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("nothing listens on port %s", port)
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if link, err := os.Readlink(fd); err == nil && inodes[link] {
			return strconv.Atoi(strings.Split(fd, "/")[2])
		}
	}
	return 0, fmt.Errorf("no process has the socket listening on port %s open", port)
}
