package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/pva"
	"github.com/pvans-project/pvans/internal/pvaconn"
)

// Probe failures shown to operators are categories, never raw errors.
func TestCategory(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	_, refused := net.Dial("tcp", closed)
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{refused, FailRefused},
		{ctx.Err(), FailTimeout},
		{fmt.Errorf("dial: %w", context.DeadlineExceeded), FailTimeout},
		{pvaconn.ErrIdleTimeout, FailTimeout},
		{io.EOF, FailNotPVA},
		{pvaconn.ErrHandshakeTimeout, FailNotPVA},
		{errConnLost, FailNotPVA},
		{&ListError{Step: "create channel", Status: pva.Status{Type: pva.StatusFatal}}, FailUnlistable},
		{errors.New("anything else"), FailNotPVA},
	} {
		if got := Category(c.err); got != c.want {
			t.Errorf("Category(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
