package nsclient

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pvans-project/pvans/internal/sim"
)

// Its CIDs are ones a Phoebus Java server claims (positive as Java ints):
// asked directly over TCP, a simulated Java server answers every name.
func TestJavaServerClaimsEveryCID(t *testing.T) {
	names := make([]string, 500)
	for i := range names {
		names[i] = fmt.Sprintf("j:%d", i)
	}
	site, err := sim.Start(context.Background(), sim.Options{Java: true, Names: [][]string{names}, UpdateInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, site.Server(0).TCP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Search(names); err != nil {
		t.Fatal(err)
	}
	answers, unresolved, err := c.Wait(ctx)
	if err != nil || len(unresolved) > 0 || len(answers) != len(names) {
		t.Fatalf("%d answers, unresolved %v, err %v", len(answers), unresolved, err)
	}
	for _, a := range answers {
		if int32(a.CID) <= 0 || a.Endpoint != site.Server(0).TCP {
			t.Fatalf("answer %+v", a)
		}
	}
}
