--- qoslab: network QoS experiments on Linux from Lua.
--
-- `require "qoslab"` gives every concern: `qoslab.timer`, `qoslab.netem`,
-- `qoslab.shape`, `qoslab.netns`, `qoslab.link`, `qoslab.testbed`, `qoslab.traffic`
-- (also as `qoslab.server`, `qoslab.client`), `qoslab.plan`, `qoslab.report`,
-- `qoslab.plot`, `qoslab.vm`, `qoslab.state`, `qoslab.latency`, `qoslab.stdtest`,
-- `qoslab.meta`, `qoslab.schedule`, `qoslab.host` (other machines over ssh),
-- `qoslab.hosts` (a plan's roles on those machines).
-- Each sub-module loads on first use, so a script that only needs timers
-- never touches netlink.
--
-- `qoslab._VERSION` is the rockspec's version (`"scm-1"`).
-- @module qoslab
-- @usage local qoslab = require 'qoslab'
-- local t0 = qoslab.timer.now()
local core = require 'qoslab.core'

local M = { _VERSION = core._VERSION }

local lazy = {
  timer = 'qoslab.timer', netem = 'qoslab.netem', shape = 'qoslab.shape',
  netns = 'qoslab.netns', testbed = 'qoslab.testbed', traffic = 'qoslab.traffic',
  plan = 'qoslab.plan', report = 'qoslab.report', plot = 'qoslab.plot',
  vm = 'qoslab.vm', state = 'qoslab.state', link = 'qoslab.link',
  latency = 'qoslab.latency', stdtest = 'qoslab.stdtest', meta = 'qoslab.meta',
  schedule = 'qoslab.schedule', host = 'qoslab.host', hosts = 'qoslab.hosts',
}
-- Shortcuts that live in a sub-module.
local shortcuts = {
  server = { 'traffic', 'server' }, client = { 'traffic', 'client' },
}

setmetatable(M, {
  __index = function(t, k)
    local name = lazy[k]
    if name then
      local mod = require(name)
      rawset(t, k, mod)
      return mod
    end
    local s = shortcuts[k]
    if s then
      local v = t[s[1]][s[2]]
      rawset(t, k, v)
      return v
    end
    return nil
  end,
})

return M
