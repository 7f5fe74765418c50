--- Comparing results folders: the same sweep from several runs in one plot
-- (e.g. before and after a sysctl change), each run labelled by what differs
-- in their metadata.
--
-- Each folder's `meta.json` (`qoslab.meta`) is flattened into named
-- settings (`flatten`: version, kernel, CPU, backend, every sysctl of each
-- place, each interface's qdiscs, offloads and MTU; never names that change
-- from run to run, such as the testbed's namespace names, nor the time).
-- The settings whose values are not the same in every folder label the
-- curves (`labels`: sysctls first, then kernel, qoslab version, backend,
-- qdiscs, offloads, MTU, CPU, host; at most three per label); where nothing
-- differs, the folder's name is the label. For every sweep that two or more
-- folders hold, one plot (`qoslab.plot.lines`) draws each folder's mean
-- against the sweep's innermost numeric parameter (one curve per folder
-- and value of the other parameters), and one table puts the values side
-- by side. `write` makes the plots and an index.html in the output folder,
-- with links to each folder's own page.
-- @module qoslab.report.compare
local check = require 'qoslab.check'
local fs = require 'qoslab.fs'
local html = require 'qoslab.report.html'
local page = require 'qoslab.report.page'

local M = {}

local esc = html.escape

local function text_of(v)
  return require('qoslab.report').cell_text(v)
end

local function qdiscs_key(qs)
  if type(qs) ~= 'table' then return nil end
  if qs.error then return 'unknown' end
  local parts = {}
  for _, q in ipairs(qs) do
    local t = tostring(q.kind) .. ' ' .. tostring(q.handle)
    if q.text then t = t .. ' ' .. q.text
    elseif type(q.spec) == 'table' then
      local keys = {}
      for k in pairs(q.spec) do keys[#keys + 1] = k end
      table.sort(keys)
      for _, k in ipairs(keys) do
        if type(q.spec[k]) ~= 'table' then t = t .. ' ' .. k .. '=' .. text_of(q.spec[k]) end
      end
    end
    parts[#parts + 1] = t
  end
  return table.concat(parts, '; ')
end

-- Setting kinds, in label priority order.
local PRIORITY = { sysctl = 1, kernel = 2, qoslab = 3, backend = 4, qdiscs = 5, offloads = 6,
                   mtu = 7, cpu = 8, host = 9 }

--- A metadata record as named settings.
-- @tparam table m metadata (`qoslab.meta.run_meta`, or the fields of a record)
-- @treturn table `{[key] = {value = string, kind = string, label = string}}`:
--   key e.g. `"sysctl net.ipv4.tcp_congestion_control"` (the caller's
--   namespace), `"client sysctl net.ipv4.tcp_rmem"` (a testbed's place),
--   `"kernel.release"`, `"client 1 qdiscs"`; label the short form used on a plot
-- @usage local s = compare.flatten(meta.read(dir))
function M.flatten(m)
  check.table('qoslab.report.compare.flatten', 'm', m)
  local out = {}
  local function put(key, kind, label, v)
    if v ~= nil then out[key] = { value = text_of(v), kind = kind, label = label } end
  end
  put('qoslab_version', 'qoslab', 'qoslab', m.qoslab_version)
  local k = type(m.kernel) == 'table' and m.kernel or { release = m.kernel }
  put('kernel.release', 'kernel', 'kernel', k.release)
  put('kernel.version', 'kernel', 'kernel build', k.version)
  put('kernel.machine', 'kernel', 'machine', k.machine)
  put('hostname', 'host', 'host', m.hostname)
  local cpu = type(m.cpu) == 'table' and m.cpu or {}
  put('cpu.model', 'cpu', 'CPU', cpu.model)
  put('cpu.count', 'cpu', 'CPUs', cpu.count)
  put('where', 'backend', 'where', m.where)
  put('backend', 'backend', 'backend', m.backend)
  local function place(prefix, sysctls, ifs)
    local p = prefix == '' and '' or (prefix .. ' ')
    for name, v in pairs(type(sysctls) == 'table' and sysctls or {}) do
      if name ~= 'error' then
        put(p .. 'sysctl ' .. name, 'sysctl', p .. name:gsub('^net%.%w+%.', ''), v)
      end
    end
    for i, f in ipairs(type(ifs) == 'table' and ifs or {}) do
      -- Interfaces by position: testbeds name theirs after the process id.
      local id = prefix == '' and tostring(f.ifname) or (prefix .. ' ' .. i)
      put(id .. ' qdiscs', 'qdiscs', id .. ' qdiscs', qdiscs_key(f.qdiscs))
      local o = f.offloads
      if type(o) == 'table' and not o.error then
        local parts = {}
        for _, n in ipairs { 'tso', 'gso', 'gro' } do
          if o[n] ~= nil then parts[#parts + 1] = n .. (o[n] and ' on' or ' off') end
        end
        put(id .. ' offloads', 'offloads', id .. ' offloads', table.concat(parts, ' '))
      end
      put(id .. ' mtu_bytes', 'mtu', id .. ' MTU', f.mtu_bytes)
    end
  end
  place('', m.sysctls, m.interfaces)
  local seen = {}
  for _, p in ipairs(type(m.paths) == 'table' and m.paths or {}) do
    local role = tostring(p.role or 'place')
    -- A second testbed's client is "client#2".
    seen[role] = (seen[role] or 0) + 1
    place(seen[role] > 1 and (role .. '#' .. seen[role]) or role, p.sysctls, p.interfaces)
  end
  return out
end

--- What differs between folders' metadata, and a label for each folder.
-- @tparam {table,...} metas metadata per folder (nil entries: no metadata)
-- @tparam {string,...} names a fallback name per folder (its folder name)
-- @treturn {string,...} labels, one per folder, all different
-- @treturn {table,...} the settings that differ, in label priority order:
--   `{{key =, label =, values = {string|nil, ...}}, ...}`
-- @usage local labels, diffs = compare.labels({m1, m2}, {'before', 'after'})
function M.labels(metas, names)
  local ctx = 'qoslab.report.compare.labels'
  check.table(ctx, 'metas', metas)
  check.table(ctx, 'names', names)
  local n = #names
  local flat, keys, info = {}, {}, {}
  for i = 1, n do
    flat[i] = type(metas[i]) == 'table' and M.flatten(metas[i]) or {}
    for k, v in pairs(flat[i]) do
      if not info[k] then info[k] = v keys[#keys + 1] = k end
    end
  end
  local diffs = {}
  for _, k in ipairs(keys) do
    local values, same = {}, true
    for i = 1, n do
      values[i] = flat[i][k] and flat[i][k].value or nil
      if values[i] ~= values[1] then same = false end
    end
    if not same then diffs[#diffs + 1] = { key = k, label = info[k].label, kind = info[k].kind, values = values } end
  end
  table.sort(diffs, function(a, b)
    local pa, pb = PRIORITY[a.kind] or 99, PRIORITY[b.kind] or 99
    if pa ~= pb then return pa < pb end
    -- The caller's namespace before a testbed's places.
    local ha, hb = a.key:sub(1, 7) == 'sysctl ', b.key:sub(1, 7) == 'sysctl '
    if ha ~= hb then return ha end
    return a.key < b.key
  end)
  -- For the labels, settings that split the folders the same way as one
  -- shown already say nothing new (a sysctl changed in every namespace).
  local shown, pattern_seen = {}, {}
  for _, d in ipairs(diffs) do
    local pat = {}
    for i = 1, n do pat[i] = tostring(d.values[i]) end
    local p = table.concat(pat, '\0')
    if not pattern_seen[p] and #shown < 3 then
      pattern_seen[p] = true
      shown[#shown + 1] = d
    end
  end
  local labels = {}
  for i = 1, n do
    local parts = {}
    for _, d in ipairs(shown) do parts[#parts + 1] = d.label .. '=' .. (d.values[i] or '(none)') end
    labels[i] = #parts > 0 and table.concat(parts, ', ') or tostring(names[i])
  end
  -- Still equal (a difference beyond the three shown, or none): add the name.
  local count = {}
  for i = 1, n do count[labels[i]] = (count[labels[i]] or 0) + 1 end
  for i = 1, n do
    if count[labels[i]] > 1 and #shown > 0 then labels[i] = labels[i] .. ' (' .. tostring(names[i]) .. ')' end
  end
  count = {}
  for i = 1, n do
    count[labels[i]] = (count[labels[i]] or 0) + 1
    if count[labels[i]] > 1 then labels[i] = labels[i] .. ' #' .. i end
  end
  return labels, diffs
end

local function abs_path(p)
  return fs.realpath(p) or ((p:sub(1, 1) == '/' and p) or (fs.cwd() .. '/' .. p))
end

--- The relative path from one folder to another (both existing).
-- @tparam string from folder
-- @tparam string to folder
-- @treturn string e.g. "../run-1"
function M.relpath(from, to)
  local a, b = {}, {}
  for s in abs_path(from):gmatch('[^/]+') do a[#a + 1] = s end
  for s in abs_path(to):gmatch('[^/]+') do b[#b + 1] = s end
  local i = 1
  while a[i] and b[i] and a[i] == b[i] do i = i + 1 end
  local parts = {}
  for _ = i, #a do parts[#parts + 1] = '..' end
  for j = i, #b do parts[#parts + 1] = b[j] end
  return #parts > 0 and table.concat(parts, '/') or '.'
end

local function slug(i, name)
  local s = tostring(name):lower():gsub('[^%w]+', '-'):gsub('^%-+', ''):gsub('%-+$', '')
  if s == '' then s = 'sweep' end
  return string.format('%02d-%s', i, s:sub(1, 60))
end

-- The x parameter of a sweep: its innermost numeric one.
local function x_param(s)
  for i = #s.order, 1, -1 do
    local name, ok = s.order[i], true
    for _, p in ipairs(s.points) do
      if type(p.params[name]) ~= 'number' then ok = false break end
    end
    if ok then return name end
  end
  return nil
end

local function combo_of(params, order, x)
  local parts = {}
  for _, k in ipairs(order) do
    if k ~= x and params[k] ~= nil then parts[#parts + 1] = k .. '=' .. text_of(params[k]) end
  end
  return table.concat(parts, ', ')
end

-- One sweep over the folders: the overlay plot and the side-by-side table.
local function sweep_section(idx, name, runs, labels, out, warnings)
  local report, plot = require 'qoslab.report', require 'qoslab.plot'
  local first
  for _, r in ipairs(runs) do if r then first = r break end end
  local scale, unit = page.metric_unit(first.metric)
  local x = x_param(first)
  local body = { '<h2>' .. esc(name) .. '</h2>' }
  if x then
    local series, all_x = {}, {}
    for i, s in ipairs(runs) do
      if s then
        local groups, order = {}, {}
        for _, p in ipairs(s.points) do
          local st = p.summary or {}
          if not p.skipped and not p.error and type(st.mean) == 'number' and type(p.params[x]) == 'number' then
            local c = combo_of(p.params, s.order, x)
            if not groups[c] then groups[c] = {} order[#order + 1] = c end
            groups[c][#groups[c] + 1] = { p.params[x], st.mean / scale, st.ci95 and st.ci95 / scale }
            all_x[#all_x + 1] = p.params[x]
          end
        end
        for _, c in ipairs(order) do
          table.sort(groups[c], function(a, b) return a[1] < b[1] end)
          series[#series + 1] = { title = labels[i] .. (c ~= '' and (', ' .. c) or ''), points = groups[c] }
        end
      end
    end
    local lo, hi, ylo, yhi = math.huge, -math.huge, math.huge, -math.huge
    for _, v in ipairs(all_x) do lo, hi = math.min(lo, v), math.max(hi, v) end
    for _, s in ipairs(series) do
      for _, p in ipairs(s.points) do ylo, yhi = math.min(ylo, p[2]), math.max(yhi, p[2]) end
    end
    local base = out .. '/' .. slug(idx, name)
    if #series > 0 then
      local title = name .. ': ' .. #labels .. ' folders compared'
      local metric = tostring(first.metric or 'metric'):gsub('%.bits_per_second$', ' throughput')
      local files, err, code = plot.lines { out = base, title = title, series = series,
        xlabel = plot.param_label(x),
        ylabel = metric .. (unit ~= first.metric and (' (' .. unit .. ')') or ''),
        -- log axes once the values span a decade, as a sweep's own plot of
        -- throughput against delay is drawn (on a linear y axis the
        -- long-delay points sit flat on zero)
        logx = lo > 0 and hi / lo >= 10, logy = ylo > 0 and yhi / ylo >= 10,
        -- Tics at the measured values: sizes in binary units, counts as integers.
        xtic_label = plot.param_tic_label(x, all_x) }
      if files then
        body[#body + 1] = page.figure { png = files.png:match('[^/]+$'), svg = files.svg and files.svg:match('[^/]+$'),
                                        title = title }
      else
        warnings[#warnings + 1] = string.format('%s: no plot: %s (%s)', name, tostring(err), tostring(code))
        body[#body + 1] = '<p class="bad">no plot: ' .. esc(err) .. ' (' .. esc(code) .. ')</p>'
      end
    end
  else
    body[#body + 1] = '<p class="note">No numeric parameter to draw against: the table only.</p>'
  end
  -- The table: one row per point any folder has, one column per folder.
  local rows, at, columns = {}, {}, {}
  for i, k in ipairs(first.order) do columns[i] = { name = k, header = k } end
  local nparams = #columns
  for i, l in ipairs(labels) do columns[nparams + i] = { name = 'f' .. i, header = l .. ' (' .. unit .. ')' } end
  local plan = require 'qoslab.plan'
  for i, s in ipairs(runs) do
    for _, p in ipairs(s and s.points or {}) do
      local ok, key = pcall(plan.point_key, p.params)
      key = ok and key or tostring(p.index)
      local row = at[key]
      if not row then
        row = {}
        for _, k in ipairs(first.order) do row[k] = p.params[k] end
        rows[#rows + 1] = row
        at[key] = row
      end
      local e = {}
      for k, v in pairs(p.summary or {}) do e[k] = v end
      e.skipped, e.error = p.skipped, p.error
      row['f' .. i] = report.mean_ci(e, scale)
    end
  end
  body[#body + 1] = html.table { columns = columns, rows = rows }
  return table.concat(body, '\n')
end

--- Compare results folders: plots and `OUT/index.html`.
-- @tparam {string,...} dirs two or more results folders
-- @tparam table opts `{out = DIR}` (required: made when missing)
-- @treturn table `{path = OUT/index.html, labels = {...}, diffs = {...},
--   sweeps = {name, ...}, warnings = {string, ...}}`: labels and diffs as
--   `labels` returns them, sweeps the names of the sweeps compared
-- @return or nil, message, CODE: "ENOENT" (a folder is missing, is not a
--   results folder or has no results.jsonl), "ENOTDIR" (a path is a file),
--   the codes of `qoslab.plan.load` (a results file that cannot be
--   read), of `qoslab.fs.mkdir_p` and `qoslab.fs.write_file`
-- @raise when dirs is not a list of two or more strings, or opts.out is not a
--   non-empty string
-- @usage compare.write({'results/before', 'results/after'}, {out = 'results/cmp'})
function M.write(dirs, opts)
  local ctx = 'qoslab.report.compare.write'
  check.table(ctx, 'dirs', dirs)
  if #dirs < 2 then check.fail(ctx, 'dirs', 'two or more results folders', #dirs) end
  for i, d in ipairs(dirs) do
    if type(d) ~= 'string' or d == '' then check.fail(ctx, 'dirs[' .. i .. ']', 'a folder path', d) end
    check.cstring(ctx, 'dirs[' .. i .. ']', d)
  end
  check.table(ctx, 'opts', opts)
  check.keys(ctx, 'opts', opts, { out = true })
  if type(opts.out) ~= 'string' or opts.out == '' then check.fail(ctx, 'opts.out', 'a folder path', opts.out) end
  check.cstring(ctx, 'opts.out', opts.out)
  local plan, meta = require 'qoslab.plan', require 'qoslab.meta'
  local metas, names, sweeps_of, warnings = {}, {}, {}, {}
  -- Every folder there first, then each one's results: a missing folder
  -- is named before what another folder lacks.
  for _, d in ipairs(dirs) do
    if not fs.is_dir(d) then
      local is, err, code = page.check_folder(d)
      if not is then return nil, err, code end
    end
  end
  for i, d in ipairs(dirs) do
    local is, ferr, fcode = page.check_folder(d)
    if not is then return nil, ferr, fcode end
    -- A folder without results has no curve to compare: an error, not a
    -- page that quietly leaves it out.
    if fs.lkind(d .. '/results.jsonl') ~= 'file' then
      return nil, 'no results.jsonl in ' .. d .. ': nothing of it to compare', 'ENOENT'
    end
    local recs, err, code = plan.load(d .. '/results.jsonl')
    if not recs then return nil, err, code end
    local m = fs.lkind(d .. '/' .. meta.FILE) == 'file' and meta.read(d) or nil
    if not m and recs[#recs] then
      local r = recs[#recs]
      m = { qoslab_version = r.qoslab_version, kernel = { release = r.kernel }, hostname = r.hostname,
            where = r.where, backend = r.backend }
    end
    metas[i] = m
    names[i] = d:gsub('/+$', ''):match('([^/]+)$') or d
    local by = {}
    for _, s in ipairs(page.sweeps(recs)) do by[s.name] = s end
    sweeps_of[i] = { list = page.sweeps(recs), by = by }
  end
  local made, merr, mcode = fs.mkdir_p(opts.out)
  if made == nil then return nil, merr, mcode end
  local labels, diffs = M.labels(metas, names)
  -- Sweeps two or more folders hold, in the order they first appear.
  local shared, seen = {}, {}
  for i = 1, #dirs do
    for _, s in ipairs(sweeps_of[i].list) do
      if not seen[s.name] then
        seen[s.name] = true
        local n = 0
        for j = 1, #dirs do if sweeps_of[j].by[s.name] then n = n + 1 end end
        if n >= 2 then shared[#shared + 1] = s.name
        else warnings[#warnings + 1] = 'sweep "' .. s.name .. '" is in one folder only: not compared' end
      end
    end
  end
  local body = { '<h1>qoslab comparison of ' .. #dirs .. ' results folders</h1>' }
  local frows = {}
  for i, d in ipairs(dirs) do
    local rel = M.relpath(opts.out, d)
    local m = metas[i] or {}
    local k = type(m.kernel) == 'table' and m.kernel.release or m.kernel
    frows[i] = '<tr><td>' .. esc(labels[i]) .. '</td><td><a href="' .. html.href(rel .. '/index.html') .. '">'
      .. esc(d) .. '</a></td><td>' .. esc(k or '-') .. '</td><td>' .. esc(m.time or '-') .. '</td></tr>'
  end
  body[#body + 1] = '<table><thead><tr><th>label</th><th>folder (its report)</th><th>kernel</th>'
    .. '<th>recorded</th></tr></thead><tbody>' .. table.concat(frows) .. '</tbody></table>'
  body[#body + 1] = '<h2>What differs</h2>'
  if #diffs == 0 then
    body[#body + 1] = '<p class="note">The folders\' metadata are the same: they are labelled by folder name.</p>'
  else
    local columns = { 'setting' }
    for i, l in ipairs(labels) do columns[i + 1] = l end
    local rows = {}
    for _, d in ipairs(diffs) do
      local row = { d.key }
      for i = 1, #dirs do row[i + 1] = d.values[i] or '(none)' end
      rows[#rows + 1] = row
    end
    body[#body + 1] = html.table { columns = columns, rows = rows }
  end
  if #shared == 0 then
    body[#body + 1] = '<p class="bad">No sweep is in two or more of these folders: nothing to overlay.</p>'
  end
  for idx, name in ipairs(shared) do
    local runs = {}
    for i = 1, #dirs do runs[i] = sweeps_of[i].by[name] or false end
    body[#body + 1] = sweep_section(idx, name, runs, labels, opts.out, warnings)
  end
  if #warnings > 0 then
    body[#body + 1] = '<h2>Notes</h2><ul>'
    for _, w in ipairs(warnings) do body[#body + 1] = '<li>' .. esc(w) .. '</li>' end
    body[#body + 1] = '</ul>'
  end
  local path = opts.out:gsub('/+$', '') .. '/index.html'
  local ok, werr, wcode = fs.replace_file(path, html.page('qoslab comparison', table.concat(body, '\n')))
  if not ok then return nil, werr, wcode end
  return { path = path, labels = labels, diffs = diffs, sweeps = shared, warnings = warnings }
end

return M
