--- The report page of a results folder: `DIR/index.html`.
--
-- One page a person opens after a run: the run's metadata (`DIR/meta.json`,
-- see `qoslab.meta`; without it, the fields every record carries), one
-- table per sweep from `DIR/results.jsonl` (`qoslab.plan.load`; the last
-- record of a point counts, so a resumed run shows each point once), every
-- PNG plot in the folder and its subfolders with its title as the caption
-- and a link to its SVG twin, and links to the data files: only regular
-- files inside the folder (symbolic links are not followed), only in a
-- results folder (`check_folder`). Links are
-- relative, so the folder can be moved or copied as a whole. `qoslab run`
-- and `qoslab demo` write it at the end of every run; `qoslab report DIR`
-- writes it again.
-- @module qoslab.report.page
local check = require 'qoslab.check'
local fs = require 'qoslab.fs'
local html = require 'qoslab.report.html'

local M = {}

local esc = html.escape

local function cell(v) return require('qoslab.report').cell_text(v) end

local STATS = { 'n', 'mean', 'stdev', 'ci95', 'ci_low', 'ci_high', 'min', 'max' }

-- A record as the tables need it: a results file is data from elsewhere, so
-- what is not of the documented shape is left out rather than trusted
-- (statistics that are not numbers, an order that names no parameter).
local function clean(r)
  local c = { sweep = tostring(r.sweep), index = r.index, params = r.params,
              metric = r.metric ~= nil and tostring(r.metric) or nil,
              skipped = r.skipped and true or nil,
              skip_reason = r.skip_reason ~= nil and tostring(r.skip_reason) or nil,
              error = r.error ~= nil and tostring(r.error) or nil,
              results = type(r.results) == 'table' and r.results or nil }
  if type(r.summary) == 'table' then
    c.summary = {}
    for _, k in ipairs(STATS) do
      local v = r.summary[k]
      if type(v) == 'number' and v == v and v ~= math.huge and v ~= -math.huge then c.summary[k] = v end
    end
  end
  if type(r.order) == 'table' then
    local order = {}
    for _, k in ipairs(r.order) do
      if type(k) == 'string' and r.params[k] ~= nil then order[#order + 1] = k end
    end
    if #order > 0 then c.order = order end
  end
  return c
end

--- Sweeps of a results file: one entry per sweep name in the order they
-- first appear, its points the last record of each point (by parameters).
-- @tparam {table,...} records as `qoslab.plan.load` returns them
-- @treturn {table,...} `{{name =, order = {...}, metric =, points = {record, ...}}, ...}`
--   (points in their `index` order; each record keeps only its documented
--   fields of the documented types: finite numbers in `summary`, the names of
--   `order` that are parameters)
function M.sweeps(records)
  check.table('qoslab.report.page.sweeps', 'records', records)
  local plan = require 'qoslab.plan'
  local list, by_name = {}, {}
  for _, r0 in ipairs(records) do
    local r = clean(r0)
    local name = r.sweep
    local s = by_name[name]
    if not s then
      s = { name = name, order = r.order, metric = r.metric, points = {}, at = {} }
      by_name[name] = s
      list[#list + 1] = s
    end
    if type(r.order) == 'table' then s.order = r.order end
    if r.metric then s.metric = r.metric end
    local ok, key = pcall(plan.point_key, r.params)
    key = ok and key or tostring(#s.points + 1)
    if s.at[key] then s.points[s.at[key]] = r
    else
      s.points[#s.points + 1] = r
      s.at[key] = #s.points
    end
  end
  for _, s in ipairs(list) do
    s.at = nil
    if type(s.order) ~= 'table' then
      local names = {}
      for k in pairs(s.points[1].params) do
        if type(k) == 'string' then names[#names + 1] = k end
      end
      table.sort(names)
      s.order = names
    end
    table.sort(s.points, function(a, b)
      local ia, ib = tonumber(a.index) or math.huge, tonumber(b.index) or math.huge
      return ia < ib
    end)
  end
  return list
end

--- Scale and unit of a sweep's metric for its tables.
-- @tparam string|nil metric the records' `metric`
-- @treturn number scale (divide by it)
-- @treturn string unit
function M.metric_unit(metric)
  if metric == nil or tostring(metric):find('bits_per_second', 1, true) then return 1e6, 'Mbit/s' end
  return 1, tostring(metric)
end

local function numeric_param(s, name)
  for _, p in ipairs(s.points) do
    if p.params[name] ~= nil and type(p.params[name]) ~= 'number' then return false end
  end
  return true
end

-- What the points of a sweep add to its table beyond mean ± CI.
local function extra_columns(scale)
  local report = require 'qoslab.report'
  local function sig(v) return v and report.sig(v / scale, 3) or '-' end
  return {
    { header = 'n', value = function(e) return e.n end },
    { header = 'min', value = function(e) return sig(e.min) end },
    { header = 'max', value = function(e) return sig(e.max) end },
    { header = 'retransmits', value = function(e)
        local n
        for _, r in ipairs(e.results or {}) do
          if type(r) == 'table' and type(r.sent) == 'table' and math.type(r.sent.retransmits) then
            n = (n or 0) + r.sent.retransmits
          end
        end
        return n or '-' end },
    { header = 'note', value = function(e)
        if e.skipped then return 'skipped: ' .. tostring(e.skip_reason or 'stop rule') end
        if e.error then return 'error: ' .. tostring(e.error) end
        return '' end },
  }
end

local function with_results(s)
  -- series/matrix read the statistics from records; the extra columns
  -- want the raw results and reasons too.
  local points = {}
  for i, r in ipairs(s.points) do
    local e = {}
    for k, v in pairs(r.summary or {}) do e[k] = v end
    e.params, e.skipped, e.skip_reason, e.error, e.results = r.params, r.skipped, r.skip_reason,
      r.error, r.results
    points[i] = e
  end
  return { name = s.name, order = s.order, points = points }
end

--- The HTML tables of one sweep: a matrix for two numeric parameters (rows
-- the outer one), then one row per point.
-- @tparam table s a sweep as `sweeps` returns
-- @treturn string HTML
function M.sweep_tables(s)
  local report = require 'qoslab.report'
  local scale, unit = M.metric_unit(s.metric)
  local data = with_results(s)
  local out = {}
  if #s.order == 2 and numeric_param(s, s.order[1]) and numeric_param(s, s.order[2]) then
    out[#out + 1] = html.table(report.matrix_table(data, { row = s.order[1], col = s.order[2],
      scale = scale, unit = unit, title = 'mean of ' .. tostring(s.metric or 'the metric') }))
  end
  out[#out + 1] = html.table(report.series_table(data, { scale = scale, unit = unit,
    extra = extra_columns(scale) }))
  return table.concat(out, '\n')
end

-- The title a gnuplot script gives its plot ("set title '...'" as
-- qoslab.plot writes it: single-quoted with '' for a quote, or
-- double-quoted with octal escapes).
local function gp_title(path)
  local f = io.open(path, 'r')
  if not f then return nil end
  local text = f:read(1 << 20) or ''
  f:close()
  local t
  for line in text:gmatch('[^\n]+') do
    local q = line:match("^%s*set%s+title%s+'(.-)'%s") or line:match("^%s*set%s+title%s+'(.-)'$")
    if q then t = q:gsub("''", "'")
    else
      local d = line:match('^%s*set%s+title%s+"(.-)"')
      if d then t = d:gsub('\\(%d%d%d)', function(o) return string.char(tonumber(o, 8) % 256) end) end
    end
    -- The last title before the first plot command is the one drawn.
    if line:match('^%s*s?plot%s') then break end
  end
  return t
end

--- How far the page looks into a results folder: `depth` levels of
-- subfolders (the folder itself is level 1) and at most `files` files.
-- @table LIMITS
M.LIMITS = { depth = 3, files = 2000 }

local function walk(dir, rel, depth, out, info)
  for _, name in ipairs(fs.list(dir) or {}) do
    if name:sub(1, 1) ~= '.' then
      local path, r = dir .. '/' .. name, rel and (rel .. '/' .. name) or name
      -- lstat: a link is never followed (it may lead out of the folder, or
      -- round in a loop); only regular files are listed.
      local kind = fs.lkind(path)
      if kind == 'directory' then
        if depth < M.LIMITS.depth then walk(path, r, depth + 1, out, info)
        else info.deep[#info.deep + 1] = r end
      elseif kind == 'file' then
        if #out < M.LIMITS.files then out[#out + 1] = r else info.cut = true end
      elseif kind == 'link' then
        info.links[#info.links + 1] = r
      end
    end
  end
  return out
end

--- Every regular file of a results folder and its subfolders (`LIMITS`),
-- relative paths, sorted; hidden names left out. Symbolic links are not
-- followed: neither a linked file nor a linked folder is listed.
-- @tparam string dir
-- @treturn {string,...}
-- @treturn table what was left out: `{links = {relative path, ...},
--   deep = {folder below LIMITS.depth, ...}, cut = true when there were
--   more than LIMITS.files files}`
function M.files(dir)
  local info = { links = {}, deep = {}, cut = false }
  local list = walk(dir, nil, 1, {}, info)
  table.sort(list)
  table.sort(info.links)
  table.sort(info.deep)
  return list, info
end

--- The plots of a results folder: its PNG files with caption and SVG twin.
-- @tparam string dir
-- @tparam[opt] {string,...} files as `files` returns (read when absent):
--   only these are embedded or read
-- @treturn {table,...} `{{png = relative path, svg = relative path|nil, title = string|nil}, ...}`
function M.plots(dir, files)
  files = files or M.files(dir)
  local have = {}
  for _, f in ipairs(files) do have[f] = true end
  local out = {}
  for _, f in ipairs(files) do
    local base = f:match('^(.*)%.png$')
    if base then
      out[#out + 1] = { png = f, svg = have[base .. '.svg'] and (base .. '.svg') or nil,
                        title = have[base .. '.gp'] and gp_title(dir .. '/' .. base .. '.gp') or nil }
    end
  end
  return out
end

--- One figure.
-- @tparam table p as `plots` returns, paths relative to the page
-- @treturn string HTML
function M.figure(p)
  local cap = { '<figcaption>' }
  if p.title and p.title ~= '' then cap[#cap + 1] = '<strong>' .. esc(p.title) .. '</strong> — ' end
  cap[#cap + 1] = '<a href="' .. html.href(p.png) .. '">' .. esc(p.png) .. '</a>'
  if p.svg then cap[#cap + 1] = ' (<a href="' .. html.href(p.svg) .. '">SVG</a>)' end
  cap[#cap + 1] = '</figcaption>'
  return '<figure><img src="' .. html.href(p.png) .. '" alt="' .. esc(p.title or p.png) .. '">'
    .. table.concat(cap) .. '</figure>'
end

local function kernel_text(m)
  local k = type(m.kernel) == 'table' and m.kernel or { release = m.kernel }
  local t = tostring(k.release or 'unknown')
  if k.version then t = t .. ' ' .. tostring(k.version) end
  if k.machine then t = t .. ' (' .. tostring(k.machine) .. ')' end
  return t
end

local function offload_text(o)
  if type(o) ~= 'table' then return '-' end
  if o.error then return 'unknown: ' .. tostring(o.error) end
  local parts = {}
  for _, k in ipairs { 'tso', 'gso', 'gro' } do
    if o[k] ~= nil then parts[#parts + 1] = k .. ' ' .. (o[k] and 'on' or 'off') end
  end
  return table.concat(parts, ', ')
end

local function qdisc_text(qs)
  if type(qs) ~= 'table' then return '-' end
  if qs.error then return 'unknown: ' .. tostring(qs.error) end
  local parts = {}
  for _, q in ipairs(qs) do
    local t = tostring(q.kind) .. ' ' .. tostring(q.handle) .. ' (parent ' .. tostring(q.parent) .. ')'
    if q.text then t = t .. ': ' .. q.text
    elseif type(q.spec) == 'table' and type(q.spec.rate_bps) == 'number' then
      t = t .. ': rate ' .. require('qoslab.plan').format_rate(q.spec.rate_bps)
      if q.spec.burst_bytes then t = t .. ', burst ' .. cell(q.spec.burst_bytes) .. ' B' end
    end
    parts[#parts + 1] = t
  end
  return table.concat(parts, '; ')
end

--- The rows of the interfaces table of a metadata record.
-- @tparam table m metadata (`qoslab.meta.run_meta`)
-- @treturn table `{columns =, rows =}` for `html.table`
function M.interface_table(m)
  local rows = {}
  local function add(place, netns, ifs)
    for _, i in ipairs(type(ifs) == 'table' and ifs or {}) do
      rows[#rows + 1] = { place, netns or '(this namespace)', i.ifname, i.error and ('error: ' .. i.error)
        or (i.kind ~= '' and i.kind or '-'), i.mtu_bytes, i.speed_mbps, offload_text(i.offloads),
        qdisc_text(i.qdiscs) }
    end
  end
  add('host', nil, m.interfaces)
  for _, p in ipairs(type(m.paths) == 'table' and m.paths or {}) do
    add(tostring(p.role) .. (p.testbed and (' (testbed ' .. cell(p.testbed) .. ')') or ''), p.netns,
      p.interfaces)
  end
  return { columns = { 'place', 'netns', 'interface', 'kind', 'MTU (B)', 'speed (Mbit/s)',
                       'offloads', 'qdiscs' }, rows = rows }
end

--- The sysctls table: one row per sysctl, one column per namespace.
-- @tparam table m metadata
-- @treturn table `{columns =, rows =}`
function M.sysctl_table(m)
  local meta = require 'qoslab.meta'
  local places = { { 'host', m.sysctls } }
  for _, p in ipairs(type(m.paths) == 'table' and m.paths or {}) do
    places[#places + 1] = { tostring(p.role) .. ' ' .. tostring(p.netns or ''), p.sysctls }
  end
  local columns = { 'sysctl' }
  for i, p in ipairs(places) do columns[i + 1] = p[1] end
  local rows = {}
  local names, seen = {}, {}
  for _, n in ipairs(meta.SYSCTLS) do names[#names + 1] = n seen[n] = true end
  for _, p in ipairs(places) do
    local extra = {}
    for k in pairs(type(p[2]) == 'table' and p[2] or {}) do
      if not seen[k] and k ~= 'error' then extra[#extra + 1] = k seen[k] = true end
    end
    table.sort(extra)
    for _, k in ipairs(extra) do names[#names + 1] = k end
  end
  for _, n in ipairs(names) do
    local row, any = { n }, false
    for i, p in ipairs(places) do
      local t = type(p[2]) == 'table' and p[2] or {}
      local v = t[n]
      if v == nil and t.error then v = 'error: ' .. tostring(t.error) end
      if t[n] ~= nil then any = true end
      row[i + 1] = v
    end
    if any then rows[#rows + 1] = row end
  end
  return { columns = columns, rows = rows }
end

-- Metadata from the records when the folder has no meta.json.
local function meta_from_records(records)
  local r = records[#records]
  if not r then return nil end
  return { qoslab_version = r.qoslab_version, kernel = { release = r.kernel }, hostname = r.hostname,
           where = r.where, backend = r.backend, time = r.time }
end

--- The metadata of a page: a summary (version, kernel, host, CPU,
-- where it ran, backend, congestion control) or the details (interfaces with their
-- qdiscs and offloads, sysctls of each namespace).
-- @tparam table|nil m metadata, or nil
-- @tparam boolean from_records whether m came from the records (no meta.json)
-- @tparam[opt] string part "summary", "details" or nil (both)
-- @treturn string HTML
function M.meta_section(m, from_records, part)
  if not m then return '<p class="note">No metadata: the folder has no meta.json and no records.</p>' end
  if part == 'details' then
    return '<h3>Interfaces and qdiscs on the path</h3>\n'
      .. '<p class="note">As they were when the first point was recorded (a plan may change them '
      .. 'per point: those changes are in the points\' parameters).</p>\n'
      .. html.table(M.interface_table(m))
      .. '\n<h3>Sysctls</h3>\n' .. html.table(M.sysctl_table(m))
  end
  local cpu = type(m.cpu) == 'table' and m.cpu or {}
  local cc = type(m.sysctls) == 'table' and m.sysctls['net.ipv4.tcp_congestion_control'] or nil
  local out = { html.pairs_table {
    { 'qoslab version', m.qoslab_version }, { 'kernel', kernel_text(m) }, { 'host', m.hostname },
    { 'CPU', cpu.model and (tostring(cpu.model) .. (cpu.count and (' × ' .. cell(cpu.count)) or '')) },
    { 'where', m.where }, { 'backend', m.backend }, { 'TCP congestion control (host)', cc }, { 'recorded', m.time },
  } }
  if from_records then
    out[#out + 1] = '<p class="note">This folder has no meta.json (written by <code>qoslab run</code> '
      .. 'since reports exist): the fields above come from the records.</p>'
  elseif part == nil then
    out[#out + 1] = M.meta_section(m, false, 'details')
  else
    out[#out + 1] = '<p class="note">The path\'s interfaces, qdiscs and sysctls: '
      .. '<a href="#path">below the plots</a>.</p>'
  end
  return table.concat(out, '\n')
end

-- qoslab-run.json: the plan's name, and how the run ended (`exit_status`,
-- `error`: written by `qoslab run` and `qoslab demo` at the end).
local function read_run(dir)
  local report = require 'qoslab.report'
  local v = fs.lkind(dir .. '/qoslab-run.json') == 'file' and report.read_json(dir .. '/qoslab-run.json')
  if type(v) ~= 'table' then return {} end
  return { plan = type(v.plan) == 'string' and v.plan or nil,
           exit_status = type(v.exit_status) == 'number' and math.tointeger(v.exit_status) or nil,
           error = type(v.error) == 'string' and v.error or nil }
end

local function plural(n, word) return n .. ' ' .. word .. (n == 1 and '' or 's') end

--- The files that make a folder a results folder: `qoslab run` and `qoslab
-- demo` write at least one of them, as a regular file, in every folder
-- they make.
-- @table MARKS
M.MARKS = { 'results.jsonl', 'meta.json', 'qoslab-run.json' }

--- Whether a path is a results folder: a folder holding one of `MARKS` as
-- a regular file (not a link). A page is written only into such a folder.
-- @tparam string dir
-- @treturn boolean|nil true
-- @return or nil, message, CODE: "ENOENT" (nothing there, or a folder
--   without any of `MARKS`), "ENOTDIR" (a file or another kind, not a folder)
function M.check_folder(dir)
  local kind = fs.kind(dir)
  if kind == nil then return nil, 'not a folder: ' .. dir, 'ENOENT' end
  if kind ~= 'directory' then return nil, 'not a folder: ' .. dir .. ' is a ' .. kind, 'ENOTDIR' end
  for _, f in ipairs(M.MARKS) do
    if fs.lkind(dir .. '/' .. f) == 'file' then return true end
  end
  return nil, 'not a results folder: ' .. dir .. ' (no ' .. table.concat(M.MARKS, ', '):gsub(', ([^,]+)$', ' nor %1')
    .. ' in it): give the folder `qoslab run` or `qoslab demo` wrote', 'ENOENT'
end

--- The page of a results folder, as text.
-- @tparam string dir the results folder
-- @treturn string the HTML document
-- @return or nil, message, CODE when the folder cannot be read: the codes
--   of `check_folder` (not a folder, not a results folder), of
--   `qoslab.plan.load` for a results file that cannot be read
-- @tparam[opt] table opts `{link_prefix = "../run-1/"}`: put before every
--   link to the folder's files, for a page written elsewhere (`write`'s `out`)
-- @raise when dir is not a string
function M.render(dir, opts)
  local ctx = 'qoslab.report.page.render'
  if dir == nil then check.fail(ctx, 'dir', 'a string', nil) end
  check.cstring(ctx, 'dir', dir)
  opts = opts or {}
  check.table(ctx, 'opts', opts)
  check.keys(ctx, 'opts', opts, { link_prefix = true })
  local prefix = opts.link_prefix ~= nil and check.string(ctx, 'opts.link_prefix', opts.link_prefix) or ''
  local is, ferr, fcode = M.check_folder(dir)
  if not is then return nil, ferr, fcode end
  local plan, meta = require 'qoslab.plan', require 'qoslab.meta'
  local records, bad = {}, 0
  if fs.lkind(dir .. '/results.jsonl') == 'file' then
    local r, b, code = plan.load(dir .. '/results.jsonl')
    if not r then return nil, b, code end
    records, bad = r, b
  end
  local m, merr, mcode = nil, nil, nil
  local from_records = false
  if fs.lkind(dir .. '/' .. meta.FILE) == 'file' then m, merr, mcode = meta.read(dir) end
  if not m then m, from_records = meta_from_records(records), true end
  local name = dir:gsub('/+$', ''):match('([^/]+)$') or dir
  local run = read_run(dir)
  local plan_name = run.plan
  local body = { '<h1>qoslab results: ' .. esc(name) .. '</h1>' }
  body[#body + 1] = '<p class="note">' .. (plan_name and ('plan <code>' .. esc(plan_name) .. '</code>, ') or '')
    .. plural(#records, 'record') .. ' in results.jsonl'
    .. (bad > 0 and (', <span class="bad">' .. bad .. (bad == 1 and ' line that does' or ' lines that do')
      .. ' not parse</span>') or '') .. '</p>'
  if run.exit_status and run.exit_status ~= 0 then
    body[#body + 1] = '<p class="bad">The run failed (exit status ' .. run.exit_status .. ')'
      .. (run.error and (': ' .. esc(run.error)) or '') .. '. The results below are those recorded before.</p>'
  end
  body[#body + 1] = '<h2>Where it ran</h2>'
  if merr then
    body[#body + 1] = '<p class="bad">meta.json cannot be read: ' .. esc(merr) .. ' (' .. esc(mcode) .. ')</p>'
  end
  body[#body + 1] = M.meta_section(m, from_records, 'summary')
  local sweeps = M.sweeps(records)
  body[#body + 1] = '<h2>Results</h2>'
  if #sweeps == 0 then body[#body + 1] = '<p class="note">No sweep recorded in this folder.</p>' end
  for _, s in ipairs(sweeps) do
    body[#body + 1] = '<h3>' .. esc(s.name) .. '</h3>'
    body[#body + 1] = '<p class="note">metric: <code>' .. esc(s.metric or '?') .. '</code>; parameters: '
      .. esc(table.concat(s.order, ', ')) .. '</p>'
    body[#body + 1] = M.sweep_tables(s)
  end
  local files, left = M.files(dir)
  local plots = M.plots(dir, files)
  body[#body + 1] = '<h2>Plots</h2>'
  if #plots == 0 then body[#body + 1] = '<p class="note">No plot (PNG) in this folder.</p>' end
  for _, p in ipairs(plots) do
    body[#body + 1] = M.figure { png = prefix .. p.png, svg = p.svg and (prefix .. p.svg), title = p.title }
  end
  if m and not from_records then
    body[#body + 1] = '<h2 id="path">The path and its settings</h2>'
    body[#body + 1] = M.meta_section(m, false, 'details')
  end
  body[#body + 1] = '<h2>Files</h2><ul>'
  for _, f in ipairs(files) do
    if f ~= 'index.html' and not f:match('%.png$') and not f:match('%.svg$') and not f:match('%.tmp$') then
      body[#body + 1] = '<li><a href="' .. html.href(prefix .. f) .. '">' .. esc(f) .. '</a></li>'
    end
  end
  body[#body + 1] = '</ul>'
  if #left.links > 0 then
    body[#body + 1] = '<p class="note">' .. #left.links .. ' symbolic link' .. (#left.links == 1 and '' or 's')
      .. ' not followed (only files inside the folder are shown): '
      .. esc(table.concat(left.links, ', ', 1, math.min(#left.links, 20))) .. (#left.links > 20 and ', ...' or '')
      .. '</p>'
  end
  if #left.deep > 0 then
    body[#body + 1] = '<p class="note">Folders deeper than ' .. M.LIMITS.depth .. ' levels not shown: '
      .. esc(table.concat(left.deep, ', ', 1, math.min(#left.deep, 20))) .. (#left.deep > 20 and ', ...' or '')
      .. '</p>'
  end
  if left.cut then
    body[#body + 1] = '<p class="note">Only the first ' .. M.LIMITS.files .. ' files are shown.</p>'
  end
  return html.page('qoslab results: ' .. name, table.concat(body, '\n'))
end

--- Write `DIR/index.html` (through a temporary file and a rename), or
-- `OUT/index.html` linking back to DIR's files (for a folder that cannot
-- be written, e.g. on a read-only mount).
-- @tparam string dir the results folder
-- @tparam[opt] table opts `{out = folder}` (made when missing; default dir)
-- @treturn string the page's path
-- @return or nil, message, CODE as `render`, or from making out
--   (`qoslab.fs.mkdir_p`) and writing (`qoslab.fs.write_file`: "EROFS",
--   "EACCES", ...)
-- @raise when dir is not a string, or opts.out not a non-empty string
-- @usage assert(require('qoslab.report.page').write('results/demo-x'))
function M.write(dir, opts)
  local ctx = 'qoslab.report.page.write'
  opts = opts or {}
  check.table(ctx, 'opts', opts)
  check.keys(ctx, 'opts', opts, { out = true })
  local out, prefix = dir, nil
  if opts.out ~= nil then
    if type(opts.out) ~= 'string' or opts.out == '' then check.fail(ctx, 'opts.out', 'a folder path', opts.out) end
    check.cstring(ctx, 'opts.out', opts.out)
    local is, ferr, fcode = M.check_folder(dir)
    if not is then return nil, ferr, fcode end
    local made, merr, mcode = fs.mkdir_p(opts.out)
    if made == nil then return nil, merr, mcode end
    out = opts.out
    local rel = require('qoslab.report.compare').relpath(out, dir)
    if rel ~= '.' then prefix = rel .. '/' end
  end
  local text, err, code = M.render(dir, { link_prefix = prefix })
  if not text then return nil, err, code end
  local path = out:gsub('/+$', '') .. '/index.html'
  local ok, werr, wcode = fs.replace_file(path, text)
  if not ok then return nil, werr, wcode end
  return path
end

return M
