package deploy

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestFirewallRecipeParses: operations.md's nftables recipe is a ruleset
// nft accepts (checked with -c, nothing is applied).
func TestFirewallRecipeParses(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)\n```nft\n(.*?)\n```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/operations.md has no ```nft recipe")
	}
	nft, err := exec.LookPath("nft")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs nft and root (nft -c still opens a netlink socket)")
	}
	cmd := exec.Command(nft, "-c", "-f", "-")
	cmd.Stdin = strings.NewReader(string(m[1]))
	cmd.WaitDelay = 10 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft -c refuses operations.md's recipe: %v\n%s", err, out)
	}
}
