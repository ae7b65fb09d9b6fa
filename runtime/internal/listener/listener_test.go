package listener

import (
	"net"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPID finds this process by a port it listens on, and nothing
// for a port nobody listens on.
func TestPID(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	_, port, err := net.SplitHostPort(ln.Addr().String())
	require.NoError(t, err)
	pid, err := PID(port)
	require.NoError(t, err)
	assert.Equal(t, os.Getpid(), pid)
	require.NoError(t, ln.Close())
	_, err = PID(port)
	assert.Error(t, err)
}
