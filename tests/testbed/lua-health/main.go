// lua-health runs an Argo CD resource health script the way Argo CD does (gopher-lua, the
// object as the global `obj`), and prints the returned table as JSON.
//
//	lua-health SCRIPT.lua < object.json
package main

import (
	"encoding/json"
	"fmt"
	"os"

	lua "github.com/yuin/gopher-lua"
)

func toLua(L *lua.LState, v interface{}) lua.LValue {
	switch v := v.(type) {
	case map[string]interface{}:
		t := L.NewTable()
		for k, item := range v {
			t.RawSetString(k, toLua(L, item))
		}
		return t
	case []interface{}:
		t := L.NewTable()
		for _, item := range v {
			t.Append(toLua(L, item))
		}
		return t
	case string:
		return lua.LString(v)
	case float64:
		return lua.LNumber(v)
	case bool:
		return lua.LBool(v)
	default:
		return lua.LNil
	}
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: lua-health SCRIPT.lua < object.json")
		os.Exit(2)
	}
	var obj interface{}
	if err := json.NewDecoder(os.Stdin).Decode(&obj); err != nil {
		fmt.Fprintln(os.Stderr, "object:", err)
		os.Exit(1)
	}
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoFile(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "script:", err)
		os.Exit(1)
	}
	result, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		fmt.Fprintln(os.Stderr, "script: must return a table {status=..., message=...}")
		os.Exit(1)
	}
	out := map[string]string{}
	result.ForEach(func(k, v lua.LValue) { out[k.String()] = v.String() })
	_ = json.NewEncoder(os.Stdout).Encode(out)
}
