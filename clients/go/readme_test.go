// readme_test.go -- README.md shows only what is run: each Go block is in
// example_test.go (which go test runs), and the install steps are
// carried out here on a new module, offline.
package dlockd

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func readmeBlocks(t *testing.T, lang string) []string {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```")
	var out []string
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

func TestReadmeGoBlocksAreExamples(t *testing.T) {
	ex, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(t, "go")
	if len(blocks) < 3 {
		t.Fatalf("%d Go blocks in README.md", len(blocks))
	}
	for _, b := range blocks {
		if !strings.Contains(string(ex), b) {
			t.Errorf("README.md shows code example_test.go does not run:\n%s", b)
		}
	}
}

func TestReadmeInstall(t *testing.T) {
	blocks := readmeBlocks(t, "sh")
	if len(blocks) != 1 {
		t.Fatalf("%d sh blocks in README.md, want the install", len(blocks))
	}
	repo, _ := filepath.Abs("../..")
	dir := t.TempDir()
	script := strings.ReplaceAll(blocks[0], "/path/to/dlockd", repo)
	main := "package main\n\nimport (\n\t\"fmt\"\n\n\t\"dlockd\"\n)\n\n" +
		"func main() { fmt.Println(dlockd.NewClient(\"\") != nil) }\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(main), 0644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-ec", "go mod init example.com/app\n"+script+"\ngo build -o app .")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}

// The Go example of docs/guides/sessions.md is run too: it is in
// example_test.go, as shown.
func TestSessionsGuideGoBlockIsAnExample(t *testing.T) {
	ex, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	guide, err := os.ReadFile("../../docs/guides/sessions.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(guide), -1)
	if len(blocks) != 1 {
		t.Fatalf("%d Go blocks in docs/guides/sessions.md, want 1", len(blocks))
	}
	if !strings.Contains(string(ex), blocks[0][1]) {
		t.Errorf("docs/guides/sessions.md shows code example_test.go does not run:\n%s", blocks[0][1])
	}
}
