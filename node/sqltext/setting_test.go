package sqltext

import (
	"fmt"
	"testing"
)

func TestSetting(t *testing.T) {
	for _, tt := range []struct {
		sql  string
		want string // "" when the statement is no SET or RESET
	}{
		{"SET x = 1", `reset=false scope="" name="x" qualified=false assign="=" value=["1"]`},
		{"set session TimeZone TO 'UTC';", `reset=false scope="session" name="TimeZone" qualified=false assign="TO" value=["'UTC'"]`},
		{"SET x = 1;;", `reset=false scope="" name="x" qualified=false assign="=" value=["1" ";"]`},
		{"RESET ALL", `reset=true scope="" name="ALL" qualified=false assign="" value=[]`},
		{"Reset Local search_path;", `reset=true scope="local" name="search_path" qualified=false assign="" value=[]`},
		{"SET GLOBAL threads = 4", `reset=false scope="global" name="threads" qualified=false assign="=" value=["4"]`},
		{`SET "Search_Path" = 'a,b'`, `reset=false scope="" name="Search_Path" qualified=false assign="=" value=["'a,b'"]`},
		{"SET ext.opt = 1", `reset=false scope="" name="ext" qualified=true assign="" value=["." "opt" "=" "1"]`},
		{"SET x 5", `reset=false scope="" name="x" qualified=false assign="" value=["5"]`},
		{"SET x == 1", `reset=false scope="" name="x" qualified=false assign="" value=["==" "1"]`},
		{"SET VARIABLE v = 42", `reset=false scope="" name="VARIABLE" qualified=false assign="" value=["v" "=" "42"]`},
		{"/* c */ SET -- d\n x = 'a' ", `reset=false scope="" name="x" qualified=false assign="=" value=["'a'"]`},
		{"SET session", `reset=false scope="session" name="" qualified=false assign="" value=[]`},
		{"SET", `reset=false scope="" name="" qualified=false assign="" value=[]`},
		{"SELECT 1", ""},
		{"'SET' x = 1", ""},
		{"PRAGMA threads = 4", ""},
	} {
		set, ok := Parse(tt.sql).Setting()
		got := ""
		if ok {
			value := []string{}
			for _, v := range set.Value {
				value = append(value, v.Text)
			}
			got = fmt.Sprintf("reset=%t scope=%q name=%q qualified=%t assign=%q value=%q",
				set.Reset, set.Scope, set.Name.Name(), set.Qualified, set.Assign.Text, value)
		}
		if got != tt.want {
			t.Errorf("Setting of %q:\n got %s\nwant %s", tt.sql, got, tt.want)
		}
	}
}
