"""How a rank of a fully_shard'ed model starts: rank 0 creates the job (or
finds it), every rank joins it, its model is checked against the job's
layout tensor by tensor, and where it starts is decided: a new job at step
0, or the job's state, by fully_shard's resume= choice.

A job outlives its trainers, so running a script again finds the state the
last run left. What happens then is never silent:

- resume="auto" (the default) continues where the job's processes were
  lost (a crash, a kill, torchrun restarting its workers, an operator's
  restore: recovery without hands), saying so on rank 0; a job whose
  every rank left it cleanly, i.e. a run that ended, is refused, naming
  its step and the choices.
- resume=True continues any state, saying so on rank 0.
- resume=False refuses any state the job has.
- resume="fresh": rank 0 deletes a job that has state (with its
  checkpoints) and creates it anew from this model; the other ranks wait
  for that one.

Whatever the choice, a process that replaces a rank lost in the middle of
a step rejoins and computes that step again (the redo: the job's other
ranks are training), and a rank new with a resize begins where the world
grew: both are the same run going on."""
import sys
import time

import torch

import zshard
from zshard.errors import FailedPrecondition, InvalidArgument, NotFound

CHOICES = ("auto", True, False, "fresh")


def check_choice(resume):
    if not any(resume is c or (isinstance(c, str) and resume == c) for c in CHOICES):
        raise InvalidArgument("resume=%r: 'auto' (continue after a lost process, refuse a run "
                              "that ended), True (continue any state), False (refuse any state) "
                              "or 'fresh' (delete the job's state and start anew)" % (resume,))


def say(text):
    print("zshard: %s" % text, file=sys.stderr, flush=True)


def start(job):
    """job (a torch.job.Job) joined and positioned: its resume state."""
    if job.opt is None:
        raise FailedPrecondition(
            "no zshard optimizer: make zshard.torch.AdamW (or SGD, Adam, Adagrad) over the "
            "model's parameters, or hand a torch.optim optimizer over with "
            "zshard.torch.from_optimizer(opt), before the first forward (a torch.optim "
            "optimizer alone updates nothing: the parameters are the servers')")
    o = job.o
    existed = o["rank"] == 0 and create(job)
    t0 = time.monotonic()
    fresh = o["resume"] == "fresh"
    while True:
        try:
            join(job)
        except InvalidArgument as e:  # made for another model or world size
            if not fresh or (o["rank"] == 0 and not existed):
                raise
            last = str(e)
            if o["rank"] == 0:
                say("job '%s' was made for another model (%s): resume='fresh' deletes it (and "
                    "its checkpoints) and creates it anew from this model" % (o["job"], e.args[0]))
            verdict = "fresh" if o["rank"] == 0 else "wait"
        else:
            got = job.t.resume()
            why, ck = job.t.resumed_from()
            try:
                verdict = decide(job, got, why, ck, existed)
            except BaseException:  # leaves as it came: having pushed nothing, it changes nothing
                job.t.close()
                job.t = None
                raise
            if verdict == "go":
                break
            last = "it holds the state of an earlier run"
            job.t.close()
            job.t = None
        if verdict == "fresh":  # rank 0: the job anew, from this model
            zshard.delete_job(o["job"], coordinator=o["coordinator"], timeout_ms=o["timeout_ms"])
            existed = create(job)
            continue
        # another rank under "fresh": rank 0 deletes the job it found
        if time.monotonic() - t0 >= o["join_timeout_s"]:
            raise FailedPrecondition(
                "resume='fresh': job '%s' is still the earlier one after %g s (join_timeout_s): "
                "%s; rank 0 deletes it and creates it anew: is rank 0 running with "
                "resume='fresh' too?" % (o["job"], o["join_timeout_s"], last))
        time.sleep(0.2)
    return job.enter(got)


def create(job):
    """Rank 0 creates the job from the model; True if one existed."""
    o = job.o
    try:
        zshard.create_job(job.spec(), coordinator=o["coordinator"], timeout_ms=o["timeout_ms"])
        return False
    except zshard.AlreadyExists:
        return True  # joined next: the join checks the layout


def join(job):
    """Joins the job as this rank (ranks other than 0 waiting for rank 0
    to create it, as long as a torchrun rendezvous would: join_timeout_s,
    saying so now and then), sets the policy and the device, and checks
    the model against the job's layout."""
    o = job.o
    t = None
    t0 = time.monotonic()
    said = t0
    while t is None:
        try:
            t = zshard.Trainer.join(o["job"], rank=o["rank"], coordinator=o["coordinator"],
                                    transport=o["transport"], timeout_ms=o["timeout_ms"],
                                    world_size=o["world_size"])
        except zshard.NotFound:
            now = time.monotonic()
            if now - t0 >= o["join_timeout_s"]:
                raise NotFound("job '%s' was not created (by rank 0) within %g s "
                               "(join_timeout_s)" % (o["job"], o["join_timeout_s"])) from None
            if now - said >= 30:
                said = now
                say("rank %d waits for rank 0 to create job '%s' (%.0f of %g s)"
                    % (o["rank"], o["job"], now - t0, o["join_timeout_s"]))
            time.sleep(0.1)
    job.t = t
    t.set_policy(prefetch=o["prefetch"], reshard_after_forward=o["reshard_after_forward"],
                 push_depth=o["push_depth"], op_timeout_ms=o["op_timeout_ms"])
    if job.devmode == "emulated":
        t.set_device(zshard.DEVICE_EMULATED)
    elif job.devmode is not None:  # its kernels' stream waits for the copies
        t.set_device(job.devmode.index if job.devmode.index is not None
                     else torch.cuda.current_device(),
                     torch.cuda.current_stream(job.devmode).cuda_stream)
    try:
        check_layout(job)
    except BaseException:
        job.t = None
        t.close()
        raise


def decide(job, got, why, ck, existed):
    """What to do with where the job stands: "go", "fresh" (rank 0:
    delete and create it), "wait" (another rank under "fresh": for rank 0
    to), or a refusal raised."""
    o = job.o
    name, rank, choice = o["job"], o["rank"], o["resume"]
    if why == "redo":  # the same run: its other ranks are training
        say("rank %d of job '%s' replaces its lost process: it computes step %d again"
            % (rank, name, got[0]))
        return "go"
    if why == "resize" or (got is None and why == "none"):
        if got is None and existed and rank == 0:
            say("job '%s' existed with no state to continue from (never trained, or its "
                "ranks were lost before any checkpoint): it starts at step 0 from this model"
                % name)
        return "go"
    if why == "stopped":
        where = ("it trained to step %d in an earlier run, which ended there (every rank left "
                 "it cleanly)" % got[0])
    else:
        where = ("its state is checkpoint %d's, step %d (an operator's restore, or the "
                 "rollback after its processes were lost)" % (ck, got[0]))
    if choice == "fresh":
        if rank == 0:
            say("job '%s' had state: %s; resume='fresh' deletes it (and its checkpoints) "
                "and starts it anew from this model" % (name, where))
            return "fresh"
        return "wait"
    if choice is True or (choice == "auto" and why == "checkpoint"):
        if rank == 0:
            say("job '%s' continues at step %d: %s (resume=%r)" % (name, got[0], where,
                                                                         choice))
        return "go"
    raise FailedPrecondition(
        "job '%s' has state: %s. fully_shard(..., resume=True) continues it from step %d; "
        "resume='fresh' deletes it (its state and checkpoints) and starts anew from this "
        "model; or name another job%s"
        % (name, where, got[0], "" if choice is False else
           " (resume='auto', the default, continues only after lost processes)"))


def check_layout(job):
    """This model against the job's layout, tensor by tensor: names,
    shapes and places; the first difference is named by its tensor (a rank
    whose model differs in a shape but not in a unit's element count was
    taken before, and trained on the others' layout)."""
    t, name = job.t, job.o["job"]
    theirs = [(i, a) for i in range(t.units) for a in t.unit_tensors(i)]
    mine = [(u.index, (n, off, tuple(shape), not p.requires_grad))
            for u in job.units for (n, p), off, shape in zip(u.params, u.offsets, u.shapes)]
    tail = ": every rank must build the same model (a model changed since the job was " \
           "created is a new job: another name, or resume='fresh')"
    for (ui, a), (mi, b) in zip(theirs, mine):
        if a[0] != b[0]:
            raise InvalidArgument("job '%s' holds %s %s where this model has %s %s%s"
                                  % (name, a[0], list(a[2]), b[0], list(b[2]), tail))
        if tuple(a[2]) != b[2]:
            raise InvalidArgument("job '%s' holds %s of shape %s; this model's is %s%s"
                                  % (name, a[0], list(a[2]), list(b[2]), tail))
        if ui != mi or a[1] != b[1]:
            raise InvalidArgument(
                "job '%s' holds %s in unit '%s' (element %d); this model has it in unit '%s' "
                "(element %d): fully_shard marks other modules here%s"
                % (name, a[0], t.unit_name(ui), a[1], job.units[mi].name, b[1], tail))
        if a[3] != b[3]:
            raise InvalidArgument(
                "job '%s' holds %s %s; this model %s it (requires_grad=%s): the frozen "
                "parameters are the job's, fixed when it was created"
                % (name, a[0], "frozen" if a[3] else "trained",
                   "trains" if a[3] else "freezes", b[3] is False))
    if len(theirs) != len(mine):
        extra = theirs[len(mine):] if len(theirs) > len(mine) else mine[len(theirs):]
        raise InvalidArgument(
            "job '%s' holds %d tensors, this model %d (%s %s%s)%s"
            % (name, len(theirs), len(mine), "the job's beyond: " if len(theirs) > len(mine)
               else "this model's beyond: ", ", ".join(x[1][0] for x in extra[:4]),
               ", ..." if len(extra) > 4 else "", tail))
    if t.units != len(job.units):  # the same tensors, grouped otherwise
        raise InvalidArgument("job '%s' has %d units, this model %d%s"
                              % (name, t.units, len(job.units), tail))
    job.frozen = job.frozen_now()
