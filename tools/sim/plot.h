/* ckpt-sim --plot (plot.c). */
#ifndef CKPT_SIM_PLOT_H
#define CKPT_SIM_PLOT_H

/* Writes a PNG of goodput against GPU count to png from json_text, the
 * --json report, by running plot_goodput.py ($CKPT_SIM_PLOTTER, else
 * share/ckpt/ beside this program's bin/) with $CKPT_PYTHON, else the first
 * of python3 and /usr/bin/python3 that imports matplotlib. Returns 0, or -1
 * after saying why on stderr. */
int sim_plot(const char *png, const char *json_text);
/* The same for any tool: script `name` in share/ckpt (or $env_var), prog
 * names the tool in messages. */
int tool_plot(const char *prog, const char *env_var, const char *name, const char *png, const char *json_text);

#endif
