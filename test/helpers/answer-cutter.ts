import { Agent, type Dispatcher } from 'undici';

/**
 * The agent's connection pool to a real platform, with a pair of scissors: a rule loses the answer to a
 * matching request after the platform has handled it (what a power cut or a dropped link does between the
 * platform's commit and the charger's), or fails the request before it is sent. Either way the agent sees a
 * network error. `down` fails every request at once, as a dead link does; a rule may take the link down at the
 * moment it cuts, so that the agent cannot retry before the test "kills" it.
 */
export interface CutRule {
  method?: string;
  /** Path without the query string. */
  path: string;
  /** The request body (JSON text) must satisfy this. */
  body?: (body: string) => boolean;
  /** `answer`: the platform handles the request, the answer is lost; `request`: never sent. */
  lose: 'answer' | 'request';
  /** Take the whole link down when cutting. */
  thenDown?: boolean;
}

export interface AnswerCutter {
  dispatcher: Dispatcher;
  /** Cuts the next request matching `rule`; resolves once it has been cut. */
  cut(rule: CutRule): Promise<void>;
  /** Every request fails at once while down. */
  setDown(down: boolean): void;
  /** What has been cut, in order (`METHOD path`). */
  readonly cuts: string[];
  close(): Promise<void>;
}

const bodyText = (body: unknown): string =>
  typeof body === 'string' ? body : Buffer.isBuffer(body) ? body.toString('utf8') : '';

export function answerCutter(ca: string): AnswerCutter {
  const base = new Agent({ connect: { ca } });
  let down = false;
  const cuts: string[] = [];
  const rules: Array<{ rule: CutRule; done: () => void }> = [];

  const take = (options: Dispatcher.DispatchOptions): { rule: CutRule; done: () => void } | undefined => {
    const path = (options.path ?? '').split('?')[0];
    const i = rules.findIndex(
      ({ rule }) =>
        rule.path === path &&
        (rule.method ?? 'POST') === options.method &&
        (rule.body === undefined || rule.body(bodyText(options.body))),
    );
    return i < 0 ? undefined : rules.splice(i, 1)[0];
  };
  const fail = (handler: Dispatcher.DispatchHandler, why: string) =>
    handler.onResponseError?.(undefined as unknown as Dispatcher.DispatchController, new Error(why));

  const dispatcher = base.compose((dispatch) => (options, handler) => {
    const what = `${options.method} ${(options.path ?? '').split('?')[0]}`;
    if (down) {
      queueMicrotask(() => fail(handler, 'link down (test)'));
      return true;
    }
    const cut = take(options);
    if (!cut) return dispatch(options, handler);
    const finish = () => {
      cuts.push(what);
      if (cut.rule.thenDown) down = true;
      cut.done();
    };
    if (cut.rule.lose === 'request') {
      queueMicrotask(() => {
        finish();
        fail(handler, 'request lost (test)');
      });
      return true;
    }
    // The platform answers; the agent never hears it.
    const scissors: Dispatcher.DispatchHandler = {
      onRequestStart: (controller, context) => handler.onRequestStart?.(controller, context),
      onResponseStart: () => undefined,
      onResponseData: () => undefined,
      onResponseEnd: (controller) => {
        finish();
        handler.onResponseError?.(controller, new Error('answer lost (test)'));
      },
      onResponseError: (controller, error) => handler.onResponseError?.(controller, error),
    };
    return dispatch(options, scissors);
  });

  return {
    dispatcher,
    cut(rule) {
      return new Promise<void>((resolve) => {
        rules.push({ rule, done: resolve });
      });
    },
    setDown(value) {
      down = value;
    },
    cuts,
    close: () => base.close(),
  };
}
