package spec

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0: "0s", 3 * time.Second: "3s", time.Minute: "1m", 90 * time.Second: "1m30s", time.Hour: "1h",
		90 * time.Minute: "1h30m", 168 * time.Hour: "168h", 1500 * time.Millisecond: "1.5s", 250 * time.Millisecond: "250ms",
		time.Hour + time.Second: "1h0m1s",
	} {
		assert.Equal(t, want, FormatDuration(d), "%d", d)
	}
}
