-- busted-main.lua - busted's runner as a script for spec/support/san-lua
-- (what /usr/bin/busted does; a LuaRocks install's busted is a shell
-- wrapper instead, which a Lua host cannot load).
require 'busted.runner' { standalone = false }
