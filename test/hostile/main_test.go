package hostile

import (
	"os"
	"testing"

	"github.com/pvans-project/pvans/internal/testutil"
)

// TestMain removes the pvans binary the rows share once they are done.
func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveBuilds()
	os.Exit(code)
}
