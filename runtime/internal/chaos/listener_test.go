package chaos

import (
	"net"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestListenerPID finds this process by a port it listens on, and nothing
// for a port nobody listens on.
func TestListenerPID(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	_, port, err := net.SplitHostPort(ln.Addr().String())
	require.NoError(t, err)
	pid, err := listenerPID(port)
	require.NoError(t, err)
	assert.Equal(t, os.Getpid(), pid)
	require.NoError(t, ln.Close())
	_, err = listenerPID(port)
	assert.Error(t, err)
}
