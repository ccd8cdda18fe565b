package config

import (
	"fmt"
	"reflect"
	"slices"
	"time"
)

// Fill sets every field of the struct dst points to whose `setting` tag
// names a setting to that setting's value in c, converted to the field's
// type (a byte count's int64 to an int, say). A part's settings value (a
// Policy, Limits or Timings) tags its fields this way, so a new setting
// reaches the part through its row and the tagged field alone: neither the
// daemon nor config lists it again. Untagged fields are left as they are,
// for the daemon's applier to compute (filters, derived values).
//
// part is the part dst belongs to: the setting's row must name it, or a
// change to that setting would not call the part's applier; a restart-only
// setting has no place in a value a reload replaces. A tag naming no
// setting, a row that does not name part, or a value that does not convert
// is a programming error and panics; every daemon test applies every part,
// so it panics there first.
func Fill(part Part, dst any, c *Config) {
	fill("config.Fill", dst, c, func(s *spec) string {
		if !slices.Contains(s.reload.parts, part) {
			return fmt.Sprintf("whose row does not name the part %q", part)
		}
		return ""
	})
}

// FillAtStart is Fill for the options a part is built with, once, from the
// configuration the daemon starts with: a tag may name any setting,
// restart-only or live (its first value; a reload reaches a live one only
// through the part's applier). So a new restart-only setting reaches its
// part through its row and the tagged option alone, too.
func FillAtStart(dst any, c *Config) {
	fill("config.FillAtStart", dst, c, func(*spec) string { return "" })
}

// fill is Fill's work; refuse says why a tagged setting has no place in
// dst ("": it has).
func fill(fn string, dst any, c *Config, refuse func(*spec) string) {
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("%s: %T is not a pointer to a struct", fn, dst))
	}
	v = v.Elem()
	t := v.Type()
	for i := range t.NumField() {
		key, ok := t.Field(i).Tag.Lookup("setting")
		if !ok {
			continue
		}
		s := specByKey[key]
		if s == nil {
			panic(fmt.Sprintf("%s: %s.%s names %q, which is not a setting", fn, t, t.Field(i).Name, key))
		}
		if why := refuse(s); why != "" {
			panic(fmt.Sprintf("%s: %s.%s takes %s, %s", fn, t, t.Field(i).Name, key, why))
		}
		val := reflect.ValueOf(s.ptr(c)).Elem()
		f := v.Field(i)
		if !convertible(val.Type(), f.Type()) {
			panic(fmt.Sprintf("%s: %s (%s) does not convert to %s.%s (%s)", fn, key, val.Type(), t, t.Field(i).Name, f.Type()))
		}
		f.Set(val.Convert(f.Type()))
	}
}

// convertible: the same type, or the same kind of number, a duration only
// to a duration, so a tag on a field of the wrong meaning does not pass
// for a conversion.
func convertible(from, to reflect.Type) bool {
	dur := reflect.TypeFor[time.Duration]()
	switch {
	case from == to:
		return true
	case from == dur || to == dur:
		return false
	}
	return kindOf(from) != "" && kindOf(from) == kindOf(to)
}

func kindOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "float"
	}
	return ""
}
