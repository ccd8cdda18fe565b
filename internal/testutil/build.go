package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	buildDir  string
	pvansBin  string
	buildErr  error
)

// PvansBinary builds cmd/pvans once per test binary and returns its path.
// The test must run inside this module (go test does).
func PvansBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		goCmd, err := GoCommand()
		if err != nil {
			buildErr = err
			return
		}
		if buildDir, buildErr = os.MkdirTemp("", "pvans-test-"); buildErr != nil {
			return
		}
		pvansBin = filepath.Join(buildDir, "pvans")
		out, err := exec.Command(goCmd, "build", "-o", pvansBin, "github.com/pvans-project/pvans/cmd/pvans").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/pvans: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return pvansBin
}

// RemoveBuilds deletes what PvansBinary built; TestMain calls it after
// m.Run, since no single test owns the shared binary.
func RemoveBuilds() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// GoCommand is the go command that runs the tests: go test puts its own
// GOROOT/bin first on PATH for the test binary.
func GoCommand() (string, error) {
	p, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go command is not on PATH: %w", err)
	}
	return p, nil
}
