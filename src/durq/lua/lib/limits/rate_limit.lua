-- GCRA (the generic cell rate algorithm) on the server clock. A limiter of `limit` starts
-- per `per` ms with a burst of b keeps one number, its TAT (theoretical arrival time, ms):
-- each start moves it on by the emission interval t = per / limit, and a start is allowed
-- while TAT - tau <= now, where tau = t * (b - 1). So after a quiet spell at most b start
-- at once, then one every t: in any window of `per` ms at most limit + b - 1 start, and
-- in the long run `limit` per `per`. Pushing the TAT into the future pauses the limiter
-- (durq.RateLimited); a scope without a rate can be paused too (its t is then 0).

--- @per-call (reset at the start of every call: lua/functions.py)
local rate_specs = {}
--- @end

-- A rate spec 'limit:per_ms:burst' -> {t = interval ms, tau = tolerance ms}, or nil for
-- '' (no rate). configure.lua stores well-formed specs only (rate_spec_ok).
local function rate_of(spec)
  if not spec or spec == '' then return nil end
  local r = rate_specs[spec]
  if r == nil then
    local limit, per, burst = string.match(spec, '^(%d+):(%d+):(%d+)$')
    limit, per, burst = tonumber(limit), tonumber(per), tonumber(burst)
    r = false
    if limit and limit >= 1 and per >= 1 and burst >= 1 then
      r = {t = per / limit, tau = per / limit * (burst - 1)}
    end
    rate_specs[spec] = r
  end
  return r or nil
end

local function rate_spec_ok(spec)
  return spec == '' or rate_of(spec) ~= nil
end

-- How many of `want` starts the limiter allows at `now`, and the TAT they count from
-- (max(tat, now)). `tat` nil: the limiter never started (or its pause was cleared).
local function gcra_room(tat, rate, now, want)
  local base = tat or now
  if base < now then base = now end
  if rate == nil then
    if base > now then return 0, base end
    return want, base
  end
  -- 1e-9: TATs are sums of fractions of a ms; rounding must not cost a start
  local room = math.floor((now + rate.tau - base) / rate.t + 1e-9) + 1
  if room < 0 then room = 0 end
  if room > want then room = want end
  return room, base
end

-- The TAT after n starts counted from base.
local function gcra_after(base, rate, n)
  if rate == nil then return base end
  return base + n * rate.t
end

-- When the limiter allows its next start (ms, rounded up).
local function gcra_next(tat, rate)
  if rate then tat = tat - rate.tau end
  return math.ceil(tat - 1e-6)
end

-- The TAT of a limiter paused for `ms` from now (a later TAT stands).
local function gcra_pause(tat, rate, now, ms)
  local resume = now + ms
  if rate then resume = resume + rate.tau end
  if tat and tat > resume then return tat end
  return resume
end

-- A TAT as stored: every digit kept (tostring keeps 14, too few for ms fractions).
local function tat_text(x)
  return string.format('%.17g', x)
end
