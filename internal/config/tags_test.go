package config

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// Every `setting` tag in the parts' code names a row of the table, so a
// setting removed (or renamed) with a tag left behind fails here, in
// config's own tests, rather than as a panic when a daemon is built.
func TestSettingTagsNameRows(t *testing.T) {
	root := filepath.Join("..", "..")
	tags := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			field, ok := n.(*ast.Field)
			if !ok || field.Tag == nil {
				return true
			}
			tag, err := strconv.Unquote(field.Tag.Value)
			if err != nil {
				return true
			}
			key, ok := reflect.StructTag(tag).Lookup("setting")
			if !ok {
				return true
			}
			tags++
			if specByKey[key] != nil {
				return true
			}
			if r, gone := removed[key]; gone {
				t.Errorf("%s: a field is tagged %q, a setting now a constant (%s): pass the constant instead", path, key, r.constant)
			} else {
				t.Errorf("%s: a field is tagged %q, which is not a setting", path, key)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if tags == 0 {
		t.Fatal("no setting tags found: the walk missed the parts")
	}
}
